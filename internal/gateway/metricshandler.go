package gateway

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler serves the gateway's registry (Config.Registry) at any
// path: what Handler serves at /metrics unless Config.MetricsApart, for a
// listener of its own.
func (g *Gateway) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(g.reg, promhttp.HandlerOpts{Registry: g.reg, EnableOpenMetrics: true})
}

package gateway

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler serves a gateway's registry ([Gateway.Registry]) at any
// path: what Handler serves at /metrics unless Config.MetricsApart, for a
// listener of its own. It needs the registry alone, not the gateway.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true})
}

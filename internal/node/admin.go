package node

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
)

// AdminHandler returns the fault-control API, for a listener of its own:
//
//	GET    /admin/faults   the current Faults
//	POST   /admin/faults   apply a FaultsPatch (JSON); 400 lists every problem
//	DELETE /admin/faults   clear every fault, restore the configured driver
//
// Every request needs "Authorization: Bearer <token>": 401 without one,
// 403 with a wrong one (compared in constant time). An empty token refuses
// everything with 403.
//
// Examples:
//
//	{"quota_exhausted": true, "retry_after_s": 20}
//	{"retire": ["llama-3.1-8b"]}
//	{"driver": "535.104"}
//	{"error_rate": 0.2}
func (n *Node) AdminHandler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, n.Faults())
	})
	mux.HandleFunc("POST /admin/faults", func(w http.ResponseWriter, r *http.Request) {
		var p FaultsPatch
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "invalid_body", "faults: "+err.Error())
			return
		}
		f, err := n.Patch(p)
		if err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", err.Error())
			return
		}
		n.cfg.Logger.Info("faults changed", "quota_exhausted", f.QuotaExhausted, "retired", f.Retired,
			"driver", f.Driver, "error_rate", f.ErrorRate)
		writeJSON(w, http.StatusOK, f)
	})
	mux.HandleFunc("DELETE /admin/faults", func(w http.ResponseWriter, _ *http.Request) {
		f := n.Reset()
		n.cfg.Logger.Info("faults reset")
		writeJSON(w, http.StatusOK, f)
	})
	return requireBearer(token, mux)
}

func requireBearer(token string, next http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearerToken(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fleetdrill-admin"`)
			apiError(w, http.StatusUnauthorized, "invalid_request_error", "unauthorized", "admin: bearer token required")
			return
		}
		if len(want) == 0 || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			apiError(w, http.StatusForbidden, "invalid_request_error", "forbidden", "admin: wrong token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

package node

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// requireAPIKey guards the inference API as vLLM's --api-key does: every
// path under /v1 needs "Authorization: Bearer <key>", and nothing else
// does, so that health probes and metrics scrapes need no secret. OPTIONS
// (a CORS preflight) passes, as in vLLM. A missing or wrong key is a 401
// in the flavor's words, counted by refused.
func requireAPIKey(key string, fl Flavor, refused func(), next http.Handler) http.Handler {
	// Digests are compared, as vLLM does, so that the comparison takes
	// the same time whatever the length of the key sent.
	want := sha256.Sum256([]byte(key))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions || !strings.HasPrefix(r.URL.Path, "/v1") {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := bearerToken(r)
		d := sha256.Sum256([]byte(got))
		if ok && subtle.ConstantTimeCompare(d[:], want[:]) == 1 {
			next.ServeHTTP(w, r)
			return
		}
		refused()
		if fl.vllm() {
			// vLLM's AuthenticationMiddleware answers this, missing key
			// or wrong, with no WWW-Authenticate.
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="fleetdrill"`)
		msg := "Incorrect API key provided."
		if !ok {
			msg = "No API key provided: send it as Authorization: Bearer KEY."
		}
		apiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", msg)
	})
}

// bearerToken returns the token of a request's "Authorization: Bearer
// TOKEN" header; the scheme's case does not matter (RFC 9110). ok is
// false when there is none.
func bearerToken(r *http.Request) (token string, ok bool) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

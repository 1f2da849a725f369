package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The prefill leg asks for one token, unstreamed, with vLLM's
// do_remote_decode, and keeps the prompt; the decode leg carries the
// prefill's kv_transfer_params whole.
func TestPrefillLegBodies(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":300,"max_completion_tokens":300,` +
		`"min_tokens":20,"stream":true,"stream_options":{"include_usage":true},"x_fleetdrill":{"input_tokens":900,"output_tokens":300}}`)
	pb, err := prefillBody(body)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(pb, &m))
	require.EqualValues(t, 1, m["max_tokens"])
	require.EqualValues(t, 1, m["max_completion_tokens"])
	require.Equal(t, false, m["stream"])
	require.NotContains(t, m, "stream_options")
	require.NotContains(t, m, "min_tokens")
	require.Equal(t, map[string]any{"input_tokens": float64(900)}, m["x_fleetdrill"])
	require.Equal(t, map[string]any{"do_remote_decode": true, "do_remote_prefill": false}, m["kv_transfer_params"])
	require.Equal(t, []any{map[string]any{"role": "user", "content": "hi"}}, m["messages"])

	kv := json.RawMessage(`{"do_remote_prefill":true,"remote_host":"p-0","remote_port":8000,"remote_request_id":"kv-1-7"}`)
	var d map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(withKVParams(body, kv), &d))
	require.JSONEq(t, string(kv), string(d["kv_transfer_params"]))
	require.JSONEq(t, "300", string(d["max_tokens"]))

	_, err = prefillBody([]byte(`not json`))
	require.Error(t, err)
}

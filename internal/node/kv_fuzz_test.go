package node

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// FuzzKVParams: whatever kv_transfer_params a client sends, a node of any
// role answers a 400 naming the field or takes the request; a pull it takes
// goes to a well-formed URL on a held KV's path, never elsewhere.
func FuzzKVParams(f *testing.F) {
	for _, s := range []string{
		`{"do_remote_decode":true}`,
		`{"do_remote_prefill":true,"remote_host":"p-0","remote_port":8000,"remote_request_id":"kv-1a-7"}`,
		`{"do_remote_prefill":true,"remote_host":"10.0.0.1","remote_request_id":"kv-0-1","remote_block_ids":[0,1,2]}`,
		`{"do_remote_prefill":true,"remote_host":"x/../admin","remote_port":-1,"remote_request_id":"../kv"}`,
		`{"do_remote_prefill":true,"do_remote_decode":true}`,
		`{"remote_port":1e99}`,
	} {
		f.Add([]byte(s))
	}
	nodes := map[string]*Node{}
	for _, role := range []string{"", "prefill", "decode"} {
		n := &Node{}
		if role != "" {
			n.kv = &kvState{cfg: KVConfig{Role: role, BytesPerToken: llama8BKVBytes}}
		}
		nodes[role] = n
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p kvParams
		if json.Unmarshal(b, &p) != nil {
			return // the body's decoder answers that 400 (serveCompletion)
		}
		for role, n := range nodes {
			j := &job{seq: n.newSeq(100, 10)}
			msg := n.kvJob(j, &p)
			if msg != "" {
				if !strings.Contains(msg, "kv_transfer_params") {
					t.Fatalf("role %q: a refusal that names no field: %q", role, msg)
				}
				continue
			}
			if j.pull == nil {
				continue
			}
			u, err := url.Parse(j.pull.url)
			if err != nil || u.Scheme != "http" || !strings.HasPrefix(u.Path, kvPath) || !kvIDPattern.MatchString(strings.TrimPrefix(u.Path, kvPath)) || u.RawQuery != "" {
				t.Fatalf("role %q: a pull to %q (%v)", role, j.pull.url, err)
			}
		}
	})
}

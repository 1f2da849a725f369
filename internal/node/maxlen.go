package node

import "github.com/fleetdrill/fleetdrill/internal/openai"

// maxLen is the longest request (input plus output tokens) rep takes: the
// node's MaxModelLen (vLLM's --max-model-len) when set and below the
// replica's KV capacity, else that capacity. A longer request is refused
// with vLLM's 400 (contextFailure), and /v1/models publishes it as
// max_model_len, as vLLM does: what a router reads to learn the server's
// limit before it sends anything.
func (n *Node) maxLen(rep *replica) int64 {
	if l := n.cfg.MaxModelLen; l > 0 && l < rep.kvCap {
		return l
	}
	return rep.kvCap
}

// modelList is the node's GET /v1/models body for the served models ids:
// vLLM's model cards in a vLLM flavor, else OpenAI's entries with vLLM's
// max_model_len beside them.
func (n *Node) modelList(ids []string) any {
	if n.cfg.Flavor.vllm() {
		return n.vllmModels(ids)
	}
	list := openai.NewModelList(ids, n.clk.start.Unix())
	for i := range list.Data {
		list.Data[i].MaxModelLen = n.maxLen(n.byName[list.Data[i].ID])
	}
	return list
}

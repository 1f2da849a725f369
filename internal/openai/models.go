// Package openai holds the pieces of the OpenAI HTTP API's wire format that
// fleetdrill's emulated node and live gateway both speak.
package openai

// Model is one entry of GET /v1/models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is vLLM's max_model_len: the longest request (input
	// plus output tokens) the server takes for the model. The emulated
	// node publishes it, as vLLM and SGLang do; 0 leaves it out.
	MaxModelLen int64 `json:"max_model_len,omitempty"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// NewModelList lists the models ids, created at the Unix time created, owned
// by fleetdrill. An empty list encodes as "data": [], never null.
func NewModelList(ids []string, created int64) ModelList {
	out := ModelList{Object: "list", Data: make([]Model, 0, len(ids))}
	for _, id := range ids {
		out.Data = append(out.Data, NewModel(id, created))
	}
	return out
}

// NewModel is model id, created at the Unix time created, owned by
// fleetdrill: an entry of GET /v1/models, and the body of GET
// /v1/models/{id}.
func NewModel(id string, created int64) Model {
	return Model{ID: id, Object: "model", Created: created, OwnedBy: "fleetdrill"}
}

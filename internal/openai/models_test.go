package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestModelList(t *testing.T) {
	b, err := json.Marshal(NewModelList([]string{"a", "b"}, 7))
	require.NoError(t, err)
	require.JSONEq(t, `{"object":"list","data":[
		{"id":"a","object":"model","created":7,"owned_by":"fleetdrill"},
		{"id":"b","object":"model","created":7,"owned_by":"fleetdrill"}]}`, string(b))
	b, err = json.Marshal(NewModelList(nil, 7))
	require.NoError(t, err)
	require.JSONEq(t, `{"object":"list","data":[]}`, string(b))
}

package provider

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEmbeddingsSendsModelAndReadsVectorsInOrder(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/embeddings", r.URL.Path)
		require.Equal(t, "Bearer k", r.Header.Get("Authorization"))
		var body struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		require.Equal(t, "nomic", body.Model)
		require.Equal(t, []string{"a", "b"}, body.Input)
		// Out of order, as the index says.
		_, _ = w.Write([]byte(`{"data":[{"index":1,"embedding":[0,1]},{"index":0,"embedding":[1,0]}]}`))
	}))
	defer srv.Close()
	e := NewEmbeddings("nomic", OpenAIConfig{BaseURL: srv.URL + "/v1/", APIKey: "k"})
	vs, err := e.Embed(t.Context(), []string{"a", "b"})
	require.NoError(t, err)
	require.Equal(t, [][]float32{{1, 0}, {0, 1}}, vs)
}

func TestEmbeddingsErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		status    int
		body      string
		want      string
		retryable bool
	}{
		"ServerMessage": {500, `{"error":{"message":"model not loaded"}}`, "model not loaded", true},
		"BadRequest":    {400, `{"error":"no such model"}`, "no such model", false},
		"TooFewVectors": {200, `{"data":[{"index":0,"embedding":[1]}]}`, "1 vectors for 2 texts", false},
		"RaggedVectors": {200, `{"data":[{"index":0,"embedding":[1]},{"index":1,"embedding":[1,2]}]}`, "different lengths", false},
		"EmptyVector":   {200, `{"data":[{"index":0,"embedding":[]},{"index":1,"embedding":[]}]}`, "different lengths", false},
		"NotJSON":       {200, `<html>`, "decode reply", false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			_, err := NewEmbeddings("m", OpenAIConfig{BaseURL: srv.URL}).Embed(t.Context(), []string{"a", "b"})
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, tc.retryable, IsRetryable(err))
		})
	}
}

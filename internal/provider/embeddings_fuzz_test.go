package provider

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Any reply body is read without panic; a reply taken as good has one
// vector per text, all of one length.
func FuzzEmbeddingsReply(f *testing.F) {
	f.Add(`{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[3,4]}]}`)
	f.Add(`{"data":[{"index":1,"embedding":[1]},{"index":1,"embedding":[2]}]}`)
	f.Add(`{"data":[{"index":-5,"embedding":[1]},{"embedding":[2]}]}`)
	f.Add(`{"data":null}`)
	f.Fuzz(func(t *testing.T, body string) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(body))
		}))
		defer srv.Close()
		vs, err := NewEmbeddings("m", OpenAIConfig{BaseURL: srv.URL}).Embed(t.Context(), []string{"a", "b"})
		if err != nil {
			return
		}
		if len(vs) != 2 || vs[0] == nil || vs[1] == nil || len(vs[0]) != len(vs[1]) || len(vs[0]) == 0 {
			t.Fatalf("accepted %q as %v", body, vs)
		}
	})
}

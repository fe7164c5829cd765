package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/a2a"
	"github.com/errandhq/errand/internal/a2a/remote"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// liveSniffer passes a stream through and calls seen once the stream has
// written a piece of live output.
type liveSniffer struct {
	http.ResponseWriter
	seen func()
}

func (s liveSniffer) Write(b []byte) (int, error) {
	n, err := s.ResponseWriter.Write(b)
	if bytes.Contains(b, []byte(`"live_output":true`)) {
		s.seen()
	}
	return n, err
}

func (s liveSniffer) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// A peer whose llm agent streams its words sends them as live output
// artifacts while the task runs; the task delegated to it still ends with
// the peer's result alone.
func TestAnLLMPeersLiveOutputIsNotItsResult(t *testing.T) {
	hold := make(chan struct{})
	var release sync.Once
	let := func() { release.Do(func() { close(hold) }) }
	t.Cleanup(let)
	model := providertest.NewOpenAIServer(t, providertest.Reply{
		Text: "Thinking aloud, at some length, before answering.", Hold: hold, HoldAfter: 2,
		ToolCalls: []provider.ToolCall{{ID: "f", Name: "finish_task", Arguments: json.RawMessage(`{"result":"the answer"}`)}},
	})
	home := t.TempDir()
	cfg := filepath.Join(home, "errand.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("agents:\n  default: {kind: llm, provider: openai, base_url: \""+model.URL()+"\", model: fake}\n"), 0o600))
	c, err := errand.Open(t.Context(), filepath.Join(home, "peer.db"), &errand.Config{ConfigFile: cfg})
	require.NoError(t, err)
	engine, err := errand.NewEngine(c, &errand.EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	done := make(chan struct{})
	server, err := a2a.New(a2a.Config{Client: c, Done: done})
	require.NoError(t, err)
	mux := http.NewServeMux()
	rpc := server.Handler()
	// The model finishes once the delegating agent has been sent a piece
	// of live output.
	mux.Handle("/a2a", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rpc.ServeHTTP(liveSniffer{ResponseWriter: w, seen: let}, r)
	}))
	mux.Handle("/.well-known/", server.Cards())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		close(done)
		srv.Close()
		require.NoError(t, engine.Stop(context.Background()))
		require.NoError(t, c.Close())
	})

	agent, err := remote.New(remote.Config{CardURL: srv.URL + a2a.CardPath, Retry: time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := agent.Handle(ctx, newFakeRun("think, then answer"))
	require.NoError(t, err)
	select {
	case <-hold:
	default:
		t.Fatal("the peer never streamed live output to the delegating agent")
	}
	require.JSONEq(t, `"the answer"`, string(res.Output))
}

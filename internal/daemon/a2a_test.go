package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/config"
)

func TestA2ADefaultAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		agents []string
		want   string
	}{
		{nil, "default"},
		{[]string{"default"}, "default"},
		{[]string{"only"}, "only"},
		{[]string{"default", "other"}, "default"},
		{[]string{"one", "two"}, "default"},
	} {
		cfg := &config.Config{Agents: map[string]config.Agent{}}
		for _, a := range tc.agents {
			cfg.Agents[a] = config.NewAgent(config.KindExec)
		}
		require.Equal(t, tc.want, a2aDefaultAgent(cfg), "agents %v", tc.agents)
		cfg.A2A.DefaultAgent = "chosen"
		require.Equal(t, "chosen", a2aDefaultAgent(cfg), "the config's choice wins")
	}
}

// TestA2AServedAndStreamsEndOnShutdown: the card is open, the endpoint
// behind the token, and a stopping daemon ends open A2A streams rather
// than waiting for them.
func TestA2AServedAndStreamsEndOnShutdown(t *testing.T) {
	home := t.TempDir()
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, &Options{Listen: "127.0.0.1:0", Lookup: env(map[string]string{"ERRAND_HOME": home}), Stderr: io.Discard,
			Ready: func(a net.Addr) { ready <- a }})
	}()
	var base string
	select {
	case a := <-ready:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("daemon did not start: %v", err)
	}
	token, err := os.ReadFile(filepath.Join(home, TokenFile))
	require.NoError(t, err)

	res, err := http.Get(base + "/.well-known/agent-card.json")
	require.NoError(t, err)
	var card map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&card))
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, base+"/a2a", card["url"])

	rpc := func(body string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/a2a", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return res
	}
	// A task that waits: it runs in a year.
	req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/api/tasks",
		strings.NewReader(`{"goal":"wait","run_at":"`+time.Now().AddDate(1, 0, 0).UTC().Format(time.RFC3339)+`"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	var task struct{ ID string }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&task))
	res.Body.Close()
	taskID := task.ID
	require.NotEmpty(t, taskID)

	stream := rpc(`{"jsonrpc":"2.0","id":2,"method":"SubscribeToTask","params":{"id":"` + taskID + `"}}`)
	defer stream.Body.Close()
	require.Equal(t, "text/event-stream", stream.Header.Get("Content-Type"))
	lines := bufio.NewScanner(stream.Body)
	require.True(t, lines.Scan())
	require.Contains(t, lines.Text(), `"task"`)

	cancel()
	ended := make(chan struct{})
	go func() {
		for lines.Scan() {
		}
		close(ended)
	}()
	// Without the stream ending, the HTTP server would wait 15 s for it.
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the A2A stream outlived the daemon's shutdown")
	}
	require.NoError(t, <-done)
}

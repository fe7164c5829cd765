package daemon

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// BenchmarkFirstPieceLatency is the time from the model server writing the
// first piece of a reply to an SSE client of GET /api/tasks/{id}/events
// reading it, through a whole daemon on the embedded store: the provider
// client, the llm agent, the live hub, the task's stream. Each task's
// reply is held until its watcher is connected, so the piece is live.
func BenchmarkFirstPieceLatency(b *testing.B) {
	var sent atomic.Int64 // when the current reply's first piece went out, in ns
	replies := make([]providertest.Reply, b.N)
	holds := make([]chan struct{}, b.N)
	for i := range replies {
		holds[i] = make(chan struct{})
		replies[i] = providertest.Reply{
			Text:      "The first words of a long answer.",
			ToolCalls: []provider.ToolCall{{ID: "f", Name: "finish_task", Arguments: []byte(`{"result":"ok"}`)}},
			Usage:     &provider.Usage{InputTokens: 10, OutputTokens: 10},
			Hold:      holds[i], HoldAfter: 0,
			Sent: func(piece int) {
				if piece == 0 {
					sent.Store(time.Now().UnixNano())
				}
			},
		}
	}
	model := providertest.NewOpenAIServer(b, replies...)
	home := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(home, "errand.yaml"), fmt.Appendf(nil, `
agents:
  default: {kind: llm, provider: openai, base_url: %q, model: m}
`, model.URL()), 0o600))
	c, _ := startDaemon(b, home)
	token, err := os.ReadFile(filepath.Join(home, TokenFile))
	require.NoError(b, err)

	ctx := context.Background()
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		task, err := c.CreateTask(ctx, &api.CreateTask{Goal: "answer"})
		require.NoError(b, err)
		require.NoError(b, model.WaitHeld(ctx, i+1))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL()+"/api/tasks/"+task.ID+"/events", nil)
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		lines := bufio.NewScanner(resp.Body)
		require.True(b, lines.Scan(), "the stream opens") // ": stream open"
		b.StartTimer()
		close(holds[i])
		for lines.Scan() {
			if lines.Text() == "event: task.output.delta" {
				break
			}
		}
		latencies = append(latencies, time.Since(time.Unix(0, sent.Load())))
		b.StopTimer()
		resp.Body.Close()
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "ms-p99")
}

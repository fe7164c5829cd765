package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// BenchmarkLiveFirstPieceSSE is the time from the model sending the first
// piece of its reply to an SSE client of the task receiving it: through
// the provider's stream reader, the llm agent, the engine's live hub, the
// subscription and the SSE writer, over loopback HTTP at both ends.
//
//	go test -run XXX -bench BenchmarkLiveFirstPieceSSE -benchtime 200x ./internal/server
func BenchmarkLiveFirstPieceSSE(b *testing.B) {
	holds := make([]chan struct{}, b.N)
	script := make([]providertest.Reply, b.N)
	for i := range b.N {
		holds[i] = make(chan struct{})
		script[i] = providertest.Reply{
			Text: "The first piece, and more.", Hold: holds[i], // held before any text
			ToolCalls: []provider.ToolCall{{ID: "f", Name: "finish_task", Arguments: json.RawMessage(`{"result":"ok"}`)}},
		}
	}
	model := providertest.NewOpenAIServer(b, script...)
	dir := b.TempDir()
	config := filepath.Join(dir, "errand.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "agents:\n  default: {kind: llm, provider: openai, base_url: %q, model: fake, max_steps: 3}\n", model.URL()), 0o600); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c, err := errand.Open(ctx, filepath.Join(dir, "errand.db"), &errand.Config{ConfigFile: config})
	if err != nil {
		b.Fatal(err)
	}
	srv := New(Config{Client: c, Token: testToken, Clock: clock.NewFake(time.Now()), Metrics: http.NotFoundHandler(),
		Logger: slog.New(slog.DiscardHandler)})
	hs := httptest.NewServer(srv.Handler())
	engine, err := errand.NewEngine(c, &errand.EngineConfig{Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	if err := engine.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, h := range holds {
			select {
			case <-h:
			default:
				close(h)
			}
		}
		srv.CloseStreams()
		hs.Close()
		_ = engine.Stop(ctx)
		_ = c.Close()
	})

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		task, err := c.Submit(ctx, &errand.SubmitParams{Goal: "stream"})
		if err != nil {
			b.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/api/tasks/"+task.ID+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(res.Body)
		readUntil := func(line string) {
			for sc.Scan() {
				if sc.Text() == line {
					return
				}
			}
			b.Fatalf("the stream ended before %q: %v", line, sc.Err())
		}
		if err := model.WaitHeld(ctx, i+1); err != nil {
			b.Fatal(err)
		}
		readUntil("event: task.started")
		b.StartTimer()
		start := time.Now()
		close(holds[i])
		readUntil("event: task.output.delta")
		lat = append(lat, time.Since(start))
		b.StopTimer()
		readUntil("event: task.completed")
		res.Body.Close()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

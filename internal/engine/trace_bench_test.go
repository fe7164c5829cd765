package engine

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/store/sqlitestore"
)

// discard is an exporter that drops what it is sent.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkStepTraced is BenchmarkStep's recorded step per iteration with
// traces off (no provider), sampled out (sample_ratio 0) and on (every
// span made and batched, then dropped): off and sampled out should cost
// what BenchmarkStep does.
func BenchmarkStepTraced(b *testing.B) {
	zero, one := 0.0, 1.0
	for _, bc := range []struct {
		name  string
		ratio *float64
	}{{"off", nil}, {"sampled_out", &zero}, {"on", &one}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := &Config{}
			if bc.ratio != nil {
				p := telemetry.NewWithExporter(&telemetry.Config{SampleRatio: bc.ratio}, discard{})
				b.Cleanup(func() { p.Shutdown(context.Background()) })
				cfg.TracerProvider = p.TracerProvider()
			}
			st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			e, err := New(st, cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			output := json.RawMessage(`"done"`)
			done := make(chan error, 1)
			pool, err := e.NewPool(&PoolConfig{Workers: 1, Handlers: map[string]taskrun.Handler{
				DefaultAgent: taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
					b.ReportAllocs()
					b.ResetTimer()
					for n := 1; n <= b.N; n++ {
						rec, err := r.BeginStep(ctx, taskrun.StepSpec{Number: n, Type: taskrun.StepLLMCall, Input: output})
						if err == nil {
							err = r.EndStep(ctx, rec.Key, taskrun.StepResult{Status: taskrun.StepDone, Output: output, TokensIn: 900, TokensOut: 300})
						}
						if err != nil {
							done <- err
							return taskrun.Result{}, err
						}
					}
					b.StopTimer()
					done <- nil
					return taskrun.Result{}, nil
				}),
			}})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.Submit(ctx, &SubmitParams{Goal: "steps"}); err != nil {
				b.Fatal(err)
			}
			if err := pool.Start(ctx); err != nil {
				b.Fatal(err)
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			if err := pool.Stop(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

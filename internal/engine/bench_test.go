package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store/sqlitestore"
)

func benchEngine(b *testing.B) *Engine {
	b.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	e, err := New(st, nil)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkSubmit is one task submitted per iteration, one transaction each.
func BenchmarkSubmit(b *testing.B) {
	e := benchEngine(b)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := e.Submit(ctx, &SubmitParams{Goal: fmt.Sprint("no-op ", i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDrain is one no-op task claimed, run and finished per iteration,
// from a backlog, with 16 workers.
func BenchmarkDrain(b *testing.B) {
	for _, workers := range []int{4, 16, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			e := benchEngine(b)
			ctx := context.Background()
			for i := range b.N {
				if _, err := e.Submit(ctx, &SubmitParams{Goal: fmt.Sprint("no-op ", i)}); err != nil {
					b.Fatal(err)
				}
			}
			done := make(chan struct{})
			var left = int64(b.N)
			pool, err := e.NewPool(&PoolConfig{Workers: workers, Handlers: map[string]taskrun.Handler{
				DefaultAgent: taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
					return taskrun.Result{}, nil
				}),
			}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := pool.Start(ctx); err != nil {
				b.Fatal(err)
			}
			go func() {
				for pool.Stats().Finished < left {
					select {
					case <-e.ready.wait():
					case <-e.written.wait():
					}
				}
				close(done)
			}()
			<-done
			b.StopTimer()
			if err := pool.Stop(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkStep is one durable step per iteration, as an agent loop makes
// it: the step recorded before it runs (one transaction), then its output,
// usage and the task's new checkpoint recorded together (another).
func BenchmarkStep(b *testing.B) {
	e := benchEngine(b)
	ctx := context.Background()
	checkpoint := json.RawMessage(`{"schema_version":1,"goal":"` + strings.Repeat("g", 200) + `","step":1,"plan":[` +
		strings.Repeat(`{"id":"1-step","title":"A plan step","status":"completed"},`, 9) +
		`{"id":"10-step","title":"A plan step","status":"pending"}],"partial_result":"` + strings.Repeat("r", 1000) + `"}`)
	output := json.RawMessage(`"` + strings.Repeat("o", 1000) + `"`)
	done := make(chan error, 1)
	pool, err := e.NewPool(&PoolConfig{Workers: 1, Handlers: map[string]taskrun.Handler{
		DefaultAgent: taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			b.ReportAllocs()
			b.ResetTimer()
			for n := 1; n <= b.N; n++ {
				rec, err := r.BeginStep(ctx, taskrun.StepSpec{Number: n, Type: taskrun.StepLLMCall, Input: output})
				if err != nil {
					done <- err
					return taskrun.Result{}, err
				}
				err = r.EndStep(ctx, rec.Key, taskrun.StepResult{
					Status: taskrun.StepDone, Output: output, TokensIn: 900, TokensOut: 300, CostUSD: 0.001, Checkpoint: checkpoint,
				})
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
}

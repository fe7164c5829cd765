package agent

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/faultstore"
	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

// streamedWrites are the store calls a task's steps make once each,
// whatever the timing: the ones a write per piece would add to.
var streamedWrites = []string{"TaskInsert", "StepStart", "StepFinish", "TaskCheckpoint", "TaskProgress",
	"TaskBudgetReserve", "EventInsert", "TaskAgentChange", "PromptOverheadRecord"}

// streamRun is one run of tasks that each stream one model reply of text
// to a watcher: the store calls it made, what the watchers saw, and how
// long the tasks took from submit to end.
type streamRun struct {
	calls   map[string]int
	writes  int // every store call but reads
	stepped int // the calls of streamedWrites
	pieces  int
	elapsed time.Duration
}

// runStreaming runs tasks llm tasks on one engine over a counting store;
// each streams text in the pieces providertest cuts it into (4 runes) to
// a Live watcher, which checks that the pieces join to the recorded text.
func runStreaming(tb testing.TB, tasks int, text string) streamRun {
	tb.Helper()
	inner, err := sqlitestore.Open(context.Background(), filepath.Join(tb.TempDir(), "errand.db"), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { inner.Close() })
	counted := faultstore.New(inner)
	e, err := engine.New(counted, &engine.Config{Clock: clock.NewFake(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))})
	require.NoError(tb, err)

	replies := make([]providertest.Reply, tasks)
	for i := range replies {
		replies[i] = providertest.Reply{Text: text,
			ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"done"}`)},
			Usage:     &provider.Usage{InputTokens: 100, OutputTokens: int64(len(text) / 4)}}
	}
	server := providertest.NewOpenAIServer(tb, replies...)
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: server.URL(), HTTPClient: server.Client()})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "gpt-4o-mini"})
	require.NoError(tb, err)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var ids []string
	for range tasks {
		task, err := e.Submit(ctx, &engine.SubmitParams{Goal: "write"})
		require.NoError(tb, err)
		ids = append(ids, task.ID)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		pieces int
		shown  = map[string]string{}
	)
	for _, id := range ids {
		sub, err := e.Subscribe(ctx, engine.EventFilter{TaskID: id, Live: true}, 0)
		require.NoError(tb, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			var got string
			for ev := range sub.Events() {
				switch ev.Type {
				case store.EventTaskOutputDelta:
					var d live.Delta
					if json.Unmarshal(ev.Data, &d) != nil || d.Offset > len([]rune(got)) {
						return
					}
					got = string([]rune(got)[:d.Offset]) + d.Text
					mu.Lock()
					pieces++
					mu.Unlock()
				case store.EventTaskCompleted, store.EventTaskFailed:
					mu.Lock()
					shown[id] = got
					mu.Unlock()
					return
				}
			}
		}()
	}

	writesBefore := map[string]int{}
	for _, p := range faultstore.Points {
		writesBefore[p] = counted.Calls(p)
	}
	start := time.Now()
	pool, err := e.NewPool(&engine.PoolConfig{Handlers: map[string]taskrun.Handler{"default": agent}, Workers: tasks})
	require.NoError(tb, err)
	require.NoError(tb, pool.Start(ctx))
	wg.Wait()
	elapsed := time.Since(start)
	require.NoError(tb, pool.Stop(ctx))

	run := streamRun{calls: map[string]int{}, pieces: pieces, elapsed: elapsed}
	for _, p := range faultstore.Points {
		n := counted.Calls(p) - writesBefore[p]
		run.calls[p] = n
		if !isRead(p) {
			run.writes += n
		}
	}
	for _, p := range streamedWrites {
		run.stepped += run.calls[p]
	}
	require.Len(tb, shown, tasks, "every watcher saw its task end")
	for _, id := range ids {
		steps, err := e.Steps(ctx, id)
		require.NoError(tb, err)
		require.NotEmpty(tb, steps)
		var reply modelReply
		require.NoError(tb, json.Unmarshal(steps[0].Output, &reply))
		require.Equal(tb, reply.Content, shown[id], "the pieces join to the recorded text")
	}
	return run
}

// isRead reports whether a store call only reads.
func isRead(point string) bool {
	for _, prefix := range []string{"TaskGet", "TaskList", "TaskCount", "LeaseOwnerList", "DependencyList", "DependentList",
		"InputList", "StepList", "EventList", "EventLast", "NotificationList", "CursorGet", "SpendSince", "SpendGuardGet",
		"SpendList", "BatchExport", "ScheduleGet", "ScheduleList", "MemoryGet", "MemoryList", "MemorySearch", "MemoryNearest",
		"CheckWritable", "PushConfigGet", "PushConfigList", "PromptOverheadGet"} {
		if strings.HasPrefix(point, prefix) {
			return true
		}
	}
	return false
}

// Live output costs no store write: sixteen tasks whose replies stream in
// a thousand pieces each make exactly the per-step writes of tasks whose
// replies come in one.
func TestLiveOutputWritesNothingPerPiece(t *testing.T) {
	t.Parallel()
	one := runStreaming(t, 16, "done")
	many := runStreaming(t, 16, strings.Repeat("word", 1000))
	require.Equal(t, 16, one.pieces, "one piece per reply")
	require.Equal(t, 16*1000, many.pieces, "a thousand pieces per reply, none lost")
	for _, p := range streamedWrites {
		require.Equal(t, one.calls[p], many.calls[p], "%s calls", p)
	}
	// Claims and finishes are batched as the tasks happen to end: never
	// more than one of each per task.
	require.LessOrEqual(t, many.calls["TaskLeaseMany"], 16+1)
	require.LessOrEqual(t, many.calls["TaskFinishMany"], 16)
}

// BenchmarkLiveOutput16Tasks streams sixteen replies, cut in one piece or
// in a thousand, to sixteen watchers, and reports the store's writes per
// task and per second next to the pieces per second the watchers got: the
// writes per task are the same however many pieces there are.
func BenchmarkLiveOutput16Tasks(b *testing.B) {
	for _, bc := range []struct {
		name string
		text string
	}{{"pieces=1", "done"}, {"pieces=1000", strings.Repeat("word", 1000)}} {
		b.Run(bc.name, func(b *testing.B) {
			var writes, stepped, pieces int
			var elapsed time.Duration
			for range b.N {
				run := runStreaming(b, 16, bc.text)
				writes += run.writes
				stepped += run.stepped
				pieces += run.pieces
				elapsed += run.elapsed
			}
			b.ReportMetric(float64(writes)/elapsed.Seconds(), "store-writes/s")
			b.ReportMetric(float64(pieces)/elapsed.Seconds(), "pieces/s")
			// Claims, renewals and finishes are batched as tasks happen to
			// end; the rest are one per step.
			b.ReportMetric(float64(stepped)/float64(16*b.N), "step-writes/task")
		})
	}
}

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand/internal/faultstore"
	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/pgstore"
	"github.com/errandhq/errand/store/sqlitestore"
)

// The live output benchmarks; the PostgreSQL ones need
// ERRAND_TEST_POSTGRES_URL:
//
//	go test -run XXX -bench BenchmarkLiveFirstPiece -benchtime 2000x ./internal/engine
//	go test -run XXX -bench BenchmarkLiveStreaming -benchtime 250x ./internal/engine

// reportLatencies reports the median and 99th percentile of lat.
func reportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// firstPieces times, b.N times, a piece written as the first of a new
// call until a Live subscription delivers it.
func firstPieces(b *testing.B, write func(step int), sub *Subscription) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		write(i + 2)
		for {
			ev, open := <-sub.Events()
			if !open {
				b.Fatalf("the subscription ended: %v", sub.Err())
			}
			if ev.Type == store.EventTaskOutputDelta && strings.Contains(string(ev.Data), fmt.Sprintf(`"step_no":%d,`, i+2)) {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// BenchmarkLiveFirstPiece is the time from an agent's piece to a Live
// subscriber: in the same process (any store), and from daemon B to a
// subscriber of daemon A on PostgreSQL.
func BenchmarkLiveFirstPiece(b *testing.B) {
	b.Run("local", func(b *testing.B) {
		st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		e, err := New(st, nil)
		if err != nil {
			b.Fatal(err)
		}
		sub, err := e.Subscribe(context.Background(), EventFilter{TaskID: "tsk_bench", Live: true}, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Close()
		firstPieces(b, func(step int) { e.Live().Write("tsk_bench", step, 0, "piece") }, sub)
	})
	b.Run("postgres-across-daemons", func(b *testing.B) {
		dsn := pgtest.DSN(b)
		a, d := openPGDaemon(b, dsn, nil), openPGDaemon(b, dsn, nil)
		d.out.relay.acquire() // as its pool would
		defer d.out.relay.release()
		<-d.listening
		sub, err := a.Subscribe(context.Background(), EventFilter{TaskID: "tsk_bench", Live: true}, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Close()
		// Until B has heard A's want, a piece reaches A only as the text
		// so far: wait for one before timing.
		d.Live().Write("tsk_bench", 1, 0, "warm")
		for ev := range sub.Events() {
			if ev.Type == store.EventTaskOutputDelta {
				break
			}
		}
		sent := d.out.relay.sent.Load()
		firstPieces(b, func(step int) { d.Live().Write("tsk_bench", step, 0, "piece") }, sub)
		b.ReportMetric(float64(d.out.relay.sent.Load()-sent)/float64(b.N), "notifies/piece")
	})
}

// countedPG is a PostgreSQL store whose calls are counted, with its
// signals and output relay.
type countedPG struct {
	*faultstore.Store
	pg *pgstore.Store
}

func (c countedPG) Listen(ctx context.Context, f func(store.Signal)) error {
	return c.pg.Listen(ctx, f)
}
func (c countedPG) RelayOutput(ctx context.Context, p string) error { return c.pg.RelayOutput(ctx, p) }
func (c countedPG) ListenOutput(ctx context.Context, f func(string)) error {
	return c.pg.ListenOutput(ctx, f)
}
func (c countedPG) Now() time.Time { return c.pg.Now() }

// readPoints are the store calls that write nothing.
var readPoints = map[string]bool{
	"TaskGetByID": true, "TaskList": true, "TaskCountByStatus": true, "LeaseOwnerList": true,
	"DependencyList": true, "DependentList": true, "InputList": true, "StepListByTask": true,
	"EventList": true, "EventLastID": true, "NotificationList": true, "CursorGet": true,
	"SpendSince": true, "SpendGuardGet": true, "SpendList": true, "BatchExport": true,
	"ScheduleGetByID": true, "ScheduleGetByName": true, "ScheduleList": true, "MemoryGetByID": true,
	"MemoryList": true, "MemorySearch": true, "MemoryNearest": true, "PushConfigGet": true,
	"PushConfigList": true, "PromptOverheadGet": true, "CheckWritable": true,
}

func (c countedPG) writes() int {
	n := 0
	for _, p := range faultstore.Points {
		if !readPoints[p] {
			n += c.Calls(p)
		}
	}
	return n
}

// BenchmarkLiveStreaming streams 16 tasks on daemon B, each writing a
// piece every 20ms (50 tokens a second, a model's pace) for b.N rounds,
// each followed by a Live subscriber on daemon A. It reports the
// notifications and store writes per second while they stream, and the
// pieces A received. idle-store-writes/s is the same window before the
// tasks stream: the pool's periodic claims and recovery passes, which
// streaming adds nothing to.
func BenchmarkLiveStreaming(b *testing.B) {
	const (
		tasks = 16
		pace  = 20 * time.Millisecond
	)
	dsn := pgtest.DSN(b)
	pg, err := pgstore.Open(context.Background(), dsn, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pg.Close() })
	counted := countedPG{Store: faultstore.New(pg), pg: pg}
	runner, err := New(counted, nil)
	if err != nil {
		b.Fatal(err)
	}
	watcher := openPGDaemon(b, dsn, nil)

	var (
		written atomic.Int64
		begun   atomic.Int64
		started = make(chan struct{}, tasks)
		begin   = make(chan struct{})
		stop    = make(chan struct{})
	)
	streamer := taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		step, err := taskrun.BeginStep(ctx, r, taskrun.StepSpec{Number: 1, Type: taskrun.StepLLMCall, Input: json.RawMessage(`{}`)})
		if err != nil {
			return taskrun.Result{}, err
		}
		started <- struct{}{}
		<-begin
		// Streams do not keep step: spread their pieces over the pace.
		time.Sleep(time.Duration(begun.Add(1)) * pace / tasks)
		tick := time.NewTicker(pace)
		defer tick.Stop()
		var text strings.Builder
		for done := false; !done; {
			select {
			case <-tick.C:
				step.Output("tok ")
				text.WriteString("tok ")
				written.Add(1)
			case <-stop:
				done = true
			}
		}
		out, _ := json.Marshal(text.String())
		return ok(""), step.End(ctx, taskrun.StepResult{Status: taskrun.StepDone, Output: out})
	})
	pool, err := runner.NewPool(&PoolConfig{Workers: tasks, Handlers: handlers(streamer)})
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer pool.Stop(context.Background())

	var (
		received atomic.Int64
		first    sync.WaitGroup
		readers  sync.WaitGroup
	)
	for range tasks {
		task, err := runner.Submit(context.Background(), &SubmitParams{Goal: "stream"})
		if err != nil {
			b.Fatal(err)
		}
		sub, err := watcher.Subscribe(context.Background(), EventFilter{TaskID: task.ID, Live: true, Types: []string{store.EventTaskOutputDelta}}, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Close()
		first.Add(1)
		readers.Go(func() {
			once := sync.OnceFunc(first.Done)
			for ev := range sub.Events() {
				once()
				var d struct{ Text string }
				_ = json.Unmarshal(ev.Data, &d)
				received.Add(int64(strings.Count(d.Text, "tok ")))
			}
		})
	}
	for range tasks {
		<-started
	}
	// The same window with every task begun and none streaming yet: the
	// store writes the pools make anyway.
	idleWrites, idleStart := counted.writes(), time.Now()
	time.Sleep(time.Duration(b.N) * pace)
	idleWrites, idleElapsed := counted.writes()-idleWrites, time.Since(idleStart).Seconds()
	close(begin)

	reached := make(chan struct{})
	go func() { first.Wait(); close(reached) }()
	select {
	case <-reached: // every task's output reaches A
	case <-time.After(time.Minute):
		b.Fatal("the output of some task did not reach the other daemon")
	}

	writes, sent, pieces, got := counted.writes(), runner.out.relay.sent.Load(), written.Load(), received.Load()
	start := time.Now()
	b.ResetTimer()
	time.Sleep(time.Duration(b.N) * pace)
	b.StopTimer()
	elapsed := time.Since(start).Seconds()
	writes, sent, pieces, got = counted.writes()-writes, runner.out.relay.sent.Load()-sent, written.Load()-pieces, received.Load()-got
	close(stop)

	b.ReportMetric(float64(pieces)/elapsed, "pieces/s")
	b.ReportMetric(float64(sent)/elapsed, "notifies/s")
	b.ReportMetric(float64(writes)/elapsed, "store-writes/s")
	b.ReportMetric(float64(idleWrites)/idleElapsed, "idle-store-writes/s")
	b.ReportMetric(float64(got)/float64(max(pieces, 1)), "received/written")
}

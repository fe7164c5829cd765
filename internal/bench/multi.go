package bench

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand"
)

// The lines a worker process writes on its stdout; the parent reads them.
const (
	lineReady    = "ready"    // the client is open; "go" on stdin starts the engine
	lineFinished = "finished" // finished <count so far>
	lineStarted  = "started"  // started <unix ns>: a timed task's agent began
)

// pingGoal marks the tasks whose start a worker reports.
const pingGoal = "ping"

// runProcesses measures with the engines in opts.Processes worker
// processes (opts.Command), this process only submitting and timing: the
// way several daemons share one PostgreSQL database.
func runProcesses(ctx context.Context, opts Options, dsn string, report *Report) error {
	client, err := errand.Open(ctx, dsn, &errand.Config{})
	if err != nil {
		return err
	}
	defer client.Close()

	begin := time.Now()
	for i := range opts.Tasks {
		if _, err := client.Submit(ctx, &errand.SubmitParams{Goal: fmt.Sprintf("no-op %d", i)}); err != nil {
			return fmt.Errorf("bench submit: %w", err)
		}
	}
	report.SubmitPerS = math.Round(float64(opts.Tasks) / time.Since(begin).Seconds())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws := make([]*workerProcess, opts.Processes)
	msgs := make(chan workerLine, 64)
	for i := range ws {
		w, err := startWorker(ctx, opts, dsn, i, msgs)
		if err != nil {
			return err
		}
		defer w.stop()
		ws[i] = w
	}
	tl := &tally{msgs: msgs, finished: make([]int64, len(ws))}
	for tl.ready < len(ws) {
		if err := tl.next(ctx); err != nil {
			return err
		}
	}

	// Drain: from "go" until the workers' finishes add up to the backlog.
	begin = time.Now()
	for _, w := range ws {
		if err := w.send("go"); err != nil {
			return err
		}
	}
	if err := tl.awaitFinished(ctx, int64(opts.Tasks)); err != nil {
		return err
	}
	report.E2EPerS = math.Round(float64(opts.Tasks) / time.Since(begin).Seconds())

	// Latency on idle workers: the submit's commit has to reach another
	// process, which claims and starts the task.
	latencies := make([]time.Duration, 0, opts.LatencySamples)
	for i := range opts.LatencySamples {
		sent := time.Now()
		if _, err := client.Submit(ctx, &errand.SubmitParams{Goal: pingGoal}); err != nil {
			return fmt.Errorf("bench submit: %w", err)
		}
		for len(tl.started) == 0 {
			if err := tl.next(ctx); err != nil {
				return err
			}
		}
		latencies = append(latencies, time.Unix(0, tl.started[0]).Sub(sent))
		tl.started = tl.started[1:]
		if err := tl.awaitFinished(ctx, int64(opts.Tasks+i+1)); err != nil {
			return err
		}
	}
	slices.Sort(latencies)
	report.LatencyP50MS = ms(percentile(latencies, 0.50))
	report.LatencyP99MS = ms(percentile(latencies, 0.99))
	for _, w := range ws {
		if err := w.stop(); err != nil {
			return err
		}
	}
	return nil
}

// workerLine is one line a worker wrote: its kind and number.
type workerLine struct {
	worker int
	kind   string
	value  int64
	err    error // the worker's output ended
}

// tally is what the workers have said so far. Every line counts
// whatever the parent waits for: a worker's lines may come in any order
// (a finish count can overtake the start it follows), and a count
// dropped would never come again.
type tally struct {
	msgs     <-chan workerLine
	ready    int
	finished []int64 // each worker's latest count
	started  []int64 // start times not yet taken, unix ns
}

// next reads one line and records it.
func (tl *tally) next(ctx context.Context) error {
	select {
	case m := <-tl.msgs:
		if m.err != nil {
			return m.err
		}
		switch m.kind {
		case lineReady:
			tl.ready++
		case lineFinished:
			tl.finished[m.worker] = max(tl.finished[m.worker], m.value)
		case lineStarted:
			tl.started = append(tl.started, m.value)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitFinished reads lines until the workers have finished n tasks in
// all.
func (tl *tally) awaitFinished(ctx context.Context, n int64) error {
	for {
		var total int64
		for _, f := range tl.finished {
			total += f
		}
		if total >= n {
			return nil
		}
		if err := tl.next(ctx); err != nil {
			return err
		}
	}
}

type workerProcess struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stopped atomic.Bool
	done    chan error
}

func startWorker(ctx context.Context, opts Options, dsn string, n int, msgs chan<- workerLine) (*workerProcess, error) {
	if len(opts.Command) == 0 {
		return nil, errors.New("bench: no command to start worker processes with")
	}
	args := append(slices.Clone(opts.Command[1:]), "--store", dsn, "--workers", strconv.Itoa(opts.Workers))
	cmd := exec.CommandContext(ctx, opts.Command[0], args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start worker: %w", err)
	}
	w := &workerProcess{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			kind, value, _ := strings.Cut(sc.Text(), " ")
			v, _ := strconv.ParseInt(value, 10, 64)
			select {
			case msgs <- workerLine{worker: n, kind: kind, value: v}:
			case <-ctx.Done():
				return
			}
		}
		err := cmd.Wait()
		w.done <- err
		if !w.stopped.Load() {
			select {
			case msgs <- workerLine{worker: n, err: fmt.Errorf("bench: worker %d ended: %v", n, cmp.Or(err, io.EOF))}:
			case <-ctx.Done():
			}
		}
	}()
	return w, nil
}

func (w *workerProcess) send(line string) error {
	_, err := io.WriteString(w.stdin, line+"\n")
	return err
}

// stop closes the worker's stdin, which stops its engine, and waits for
// it to exit; a second stop does nothing.
func (w *workerProcess) stop() error {
	if w.stopped.Swap(true) {
		return nil
	}
	w.stdin.Close()
	select {
	case err := <-w.done:
		return err
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		return errors.New("bench: a worker did not stop within 30 s")
	}
}

// Worker is a worker process of a multi-process bench (errand bench
// --processes): it runs an engine with workers on the database at dsn,
// started by a "go" line on in and stopped when in ends, and reports on
// out how many tasks it finished and when each timed task started.
func Worker(ctx context.Context, dsn string, workers int, in io.Reader, out io.Writer) error {
	lines := make(chan string, 64)
	agent := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		if run.Task().Goal == pingGoal {
			lines <- fmt.Sprintf("%s %d", lineStarted, time.Now().UnixNano())
		}
		return errand.Result{}, nil
	})
	client, err := errand.Open(ctx, dsn, &errand.Config{Agents: map[string]errand.Agent{"default": agent}})
	if err != nil {
		return err
	}
	defer client.Close()
	engine, err := errand.NewEngine(client, &errand.EngineConfig{Workers: workers})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(out, lineReady); err != nil {
		return err
	}
	stdin := bufio.NewScanner(in)
	if !stdin.Scan() || stdin.Text() != "go" {
		return nil
	}
	if err := engine.Start(ctx); err != nil {
		return err
	}
	defer engine.Stop(context.WithoutCancel(ctx))
	inDone := make(chan struct{})
	go func() {
		for stdin.Scan() {
		}
		close(inDone)
	}()

	// Finish counts go out every millisecond they change: the parent's
	// clock stops within a millisecond of the last finish.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var reported int64
	for {
		select {
		case l := <-lines:
			if _, err := fmt.Fprintln(out, l); err != nil {
				return err
			}
		case <-tick.C:
			if n := engine.Stats().Finished; n != reported {
				reported = n
				if _, err := fmt.Fprintf(out, "%s %d\n", lineFinished, n); err != nil {
					return err
				}
			}
		case <-inDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

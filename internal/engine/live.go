package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Live output: what a running agent writes through taskrun.Step.Output
// goes to the engine's hub, and from there to every Live subscription of
// the task, and (on a store shared by several processes) through the
// relay to the processes whose subscriptions follow it. Nothing is
// written to the store.

const (
	// liveStaleAfter is how long a call may go untouched before it is
	// swept: one whose process stopped without ending it.
	liveStaleAfter = 10 * time.Minute
	// liveSweepEvery spaces the sweeps, made as output is written or
	// followed, so no timer runs for them.
	liveSweepEvery = time.Minute
	// remoteStepWait bounds how long a subscription holds the record of a
	// step another process runs for the end of its call, whose last
	// pieces the relay may still be carrying.
	remoteStepWait = 250 * time.Millisecond
)

// liveOutput is the engine's share of live output.
type liveOutput struct {
	hub   *live.Hub
	clock clock.Clock
	relay *relay // nil when the store is one process's

	mu        sync.Mutex
	runs      map[*execution]*openCalls
	lastSweep time.Time
}

// openCalls are the calls an execution has written to and not ended, to
// end when the execution does (an agent that failed mid-call).
type openCalls struct {
	calls map[[2]int]struct{}
}

func newLiveOutput(st store.Store, clk clock.Clock, logger *slog.Logger) *liveOutput {
	o := &liveOutput{
		hub:       live.NewHub(live.Options{Now: clk.Now}),
		clock:     clk,
		runs:      map[*execution]*openCalls{},
		lastSweep: clk.Now(),
	}
	if rs, ok := st.(store.OutputRelay); ok {
		o.relay = newRelay(rs, o.hub, clk, logger)
	}
	return o
}

// Live returns the engine's hub of live output. Watchers should prefer
// Subscribe with EventFilter.Live, which also brings the output of tasks
// other processes run.
func (e *Engine) Live() *live.Hub { return e.out.hub }

var _ taskrun.OutputWriter = (*run)(nil)

// Output implements taskrun.OutputWriter: the text goes to the task's
// watchers at once, never blocking the agent.
func (r *run) Output(stepNo, callIndex int, text string) {
	if r.x.ctx.Err() != nil {
		return // the execution is over or stopping: its calls have ended
	}
	o := r.x.pool.e.out
	o.mu.Lock()
	open := o.runs[r.x]
	if open == nil {
		open = &openCalls{calls: map[[2]int]struct{}{}}
		o.runs[r.x] = open
		x := r.x
		context.AfterFunc(x.ctx, func() { o.executionOver(x) })
	}
	open.calls[[2]int{stepNo, callIndex}] = struct{}{}
	o.mu.Unlock()
	o.hub.Write(r.x.task.ID, stepNo, callIndex, text)
	o.maybeSweep()
}

// OutputEnded implements taskrun.OutputWriter: the step's record now
// holds the call's text.
func (r *run) OutputEnded(stepNo, callIndex int) {
	o := r.x.pool.e.out
	o.mu.Lock()
	if open := o.runs[r.x]; open != nil {
		delete(open.calls, [2]int{stepNo, callIndex})
	}
	o.mu.Unlock()
	o.hub.End(r.x.task.ID, stepNo, callIndex)
}

// executionOver ends the calls an execution left open.
func (o *liveOutput) executionOver(x *execution) {
	o.mu.Lock()
	open := o.runs[x]
	delete(o.runs, x)
	var calls [][2]int
	if open != nil {
		for c := range open.calls {
			calls = append(calls, c)
		}
	}
	o.mu.Unlock()
	for _, c := range calls {
		o.hub.End(x.task.ID, c[0], c[1])
	}
}

// maybeSweep forgets stale calls, at most once every liveSweepEvery.
func (o *liveOutput) maybeSweep() {
	now := o.clock.Now()
	o.mu.Lock()
	due := now.Sub(o.lastSweep) >= liveSweepEvery
	if due {
		o.lastSweep = now
	}
	o.mu.Unlock()
	if due {
		o.hub.Sweep(now.Add(-liveStaleAfter))
	}
}

// liveFollow is one subscription's view of a task's live output.
type liveFollow struct {
	o    *liveOutput
	task string
	sub  *live.Sub
}

// follow starts following the task's live output: first the text so far
// of each live call, here or (through the relay) in another process.
func (o *liveOutput) follow(taskID string) *liveFollow {
	o.maybeSweep()
	f := &liveFollow{o: o, task: taskID, sub: o.hub.Subscribe(taskID)}
	if o.relay != nil {
		o.relay.follow(taskID)
	}
	return f
}

func (f *liveFollow) close() {
	if f == nil {
		return
	}
	f.sub.Close()
	if f.o.relay != nil {
		f.o.relay.unfollow(f.task)
	}
}

// ready receives when the follow has deltas to send; nil never does.
func (f *liveFollow) ready() <-chan struct{} {
	if f == nil {
		return nil
	}
	return f.sub.Ready()
}

// send sends the deltas waiting, as events with ID 0.
func (f *liveFollow) send(ctx context.Context, out chan<- *store.Event) error {
	if f == nil {
		return nil
	}
	for _, d := range f.sub.Take() {
		data, err := json.Marshal(d)
		if err != nil {
			return err
		}
		ev := &store.Event{
			Type: store.EventTaskOutputDelta, TaskID: d.TaskID, Actor: store.AgentActor(d.TaskID),
			Data: data, CreatedAt: f.o.clock.Now().UTC(),
		}
		select {
		case out <- ev:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// beforeStep, for the event of a step whose call another process runs
// and whose end has not arrived yet, sends the pieces that come until it
// does (or remoteStepWait passes): the relay carries pieces apart from the
// journal, and they were written before the step's record.
func (f *liveFollow) beforeStep(ctx context.Context, ev *store.Event, out chan<- *store.Event) error {
	if f == nil || f.o.relay == nil || ev.Type != store.EventTaskStep {
		return nil
	}
	var pos struct {
		StepNo    int `json:"step_no"`
		CallIndex int `json:"call_index"`
	}
	if json.Unmarshal(ev.Data, &pos) != nil || !f.o.hub.OpenRemote(f.task, pos.StepNo, pos.CallIndex) {
		return nil
	}
	timer := f.o.clock.NewTimer(remoteStepWait)
	defer timer.Stop()
	for f.o.hub.OpenRemote(f.task, pos.StepNo, pos.CallIndex) {
		select {
		case <-f.sub.Ready():
			if err := f.send(ctx, out); err != nil {
				return err
			}
		case <-timer.C():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.send(ctx, out)
}

// wantsLive reports whether a subscription with filter delivers deltas.
func wantsLive(filter EventFilter) bool {
	return filter.Live && filter.TaskID != "" &&
		(len(filter.Types) == 0 || slices.Contains(filter.Types, store.EventTaskOutputDelta))
}

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/internal/crashpoint"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// execution is one claimed task running on a worker.
type execution struct {
	pool   *Pool
	task   *store.Task
	lease  store.Lease
	info   *taskrun.Info
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu sync.Mutex
	// deadline is when the lease may expire, by this process's clock: the
	// time the claim or last renewal was sent, plus the TTL.
	deadline  time.Time
	lost      bool
	finishing bool // the agent returned; its finish is queued
	pause     bool // an operator asked the task to pause after this step
	// spendUntil is when a step the spend guard refused may ask again.
	spendUntil time.Time
	// progress is the task's progress as last written, which a wait for
	// the model provider relabels.
	progress store.Progress
	// unrecorded is the version of its agent the task's next ended step
	// records: the task had none when the attempt started.
	unrecorded *store.AgentVersion
	// lastStep is the step the agent began last: the one that asks, when
	// it ends the attempt with a question.
	lastStep atomic.Int64
	// trace is the attempt's tracing, nil when traces are off or the
	// attempt is not sampled (see trace.go).
	trace *attemptTrace
}

// leaseMargin is how long before its deadline a lease stops being trusted:
// the task is stopped before another worker can take it over.
func leaseMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// launch starts a worker for a task claimed at claimedAt (local time, taken
// before the claim was sent); begun is called once it runs.
func (p *Pool) launch(ctx context.Context, t *store.Task, claimedAt time.Time, begun func()) {
	xctx, cancel := context.WithCancelCause(ctx)
	x := &execution{
		pool:     p,
		task:     t,
		lease:    store.Lease{TaskID: t.ID, Token: t.LeaseToken},
		info:     taskInfo(t),
		ctx:      xctx,
		cancel:   cancel,
		deadline: claimedAt.Add(p.e.cfg.LeaseTTL),
		pause:    !t.PauseRequestedAt.IsZero(),
	}
	if t.Progress != nil {
		x.progress = *t.Progress
	}
	p.mu.Lock()
	p.active++
	p.running[t.ID] = x
	p.mu.Unlock()
	if !t.CancelRequestedAt.IsZero() || p.e.cancelNoted(x.lease) {
		x.cancel(taskrun.ErrCancelled)
	}
	p.execs.Add(2)
	go func() {
		defer p.execs.Done()
		begun()
		p.execute(x)
	}()
	go func() {
		defer p.execs.Done()
		p.watchLease(x)
	}()
}

// watchLease stops the task when its lease deadline nears without a
// renewal: past it, another worker may run the task. Once the agent has
// returned, the store's token check on the finish decides instead.
func (p *Pool) watchLease(x *execution) {
	for {
		x.mu.Lock()
		left := x.deadline.Add(-leaseMargin(p.e.cfg.LeaseTTL)).Sub(p.e.clock.Now())
		finishing := x.finishing
		x.mu.Unlock()
		if finishing || x.ctx.Err() != nil {
			return
		}
		if left <= 0 {
			x.loseLease()
			return
		}
		timer := p.e.clock.NewTimer(left)
		select {
		case <-timer.C(): // check again: a renewal may have moved the deadline
		case <-x.ctx.Done():
			timer.Stop()
			return
		}
	}
}

// trusted reports whether the lease may still be relied on: not known lost
// and not past its deadline less the margin. An untrusted lease is given up.
func (x *execution) trusted() bool {
	now := x.pool.e.clock.Now()
	x.mu.Lock()
	ok := !x.lost && now.Before(x.deadline.Add(-leaseMargin(x.pool.e.cfg.LeaseTTL)))
	x.mu.Unlock()
	if !ok {
		x.loseLease()
	}
	return ok
}

func taskInfo(t *store.Task) *taskrun.Info {
	info := &taskrun.Info{
		ID: t.ID, ParentID: t.ParentID, RunID: t.RunID, SessionID: t.SessionID, Agent: t.Agent,
		Title: t.Title, Goal: t.Goal, Input: t.Input, Metadata: t.Metadata, Tags: t.Tags,
		Priority: t.Priority, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, Checkpoint: t.Checkpoint,
	}
	if o := t.Options; o != nil {
		info.Options = taskrun.Options{MaxSteps: o.MaxSteps, Tools: o.Tools, ToolsDeny: o.ToolsDeny, SystemPrompt: o.SystemPrompt, Scout: o.Scout}
	}
	if b := t.Budget; b != nil {
		info.Budget = taskrun.Budget{
			MaxTokens: b.MaxTokens, MaxCostUSD: b.MaxCostUSD, MaxWallClock: time.Duration(b.MaxWallClock), MaxToolCalls: b.MaxToolCalls,
		}
	}
	if c := t.Consumed; c != nil {
		info.Spent = taskrun.Amount{Tokens: c.Tokens, CostUSD: c.CostUSD, ToolCalls: c.ToolCalls}
	}
	return info
}

// cancelTask cancels the context of a task this pool runs under lease.
func (p *Pool) cancelTask(lease store.Lease) {
	p.mu.Lock()
	x := p.running[lease.TaskID]
	p.mu.Unlock()
	if x != nil && x.lease == lease {
		x.cancel(taskrun.ErrCancelled)
	}
}

// pauseTask tells a task this pool runs under lease to pause after its
// current step.
func (p *Pool) pauseTask(lease store.Lease) {
	p.mu.Lock()
	x := p.running[lease.TaskID]
	p.mu.Unlock()
	if x != nil && x.lease == lease {
		x.mu.Lock()
		x.pause = true
		x.mu.Unlock()
	}
}

// loseLease stops a task whose lease is gone; its finish is not written.
func (x *execution) loseLease() {
	x.mu.Lock()
	if !x.lost {
		x.pool.stats.leaseLost.Add(1)
	}
	x.lost = true
	x.mu.Unlock()
	x.cancel(store.ErrLeaseLost)
}

func (x *execution) leaseLost() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lost
}

func (p *Pool) execute(x *execution) {
	var result taskrun.Result
	ctx := p.startTrace(x)
	err := p.holdForAgent(x)
	if err == nil {
		err = p.checkAgentVersion(x)
	}
	if err == nil {
		result, err = callHandler(ctx, p.cfg.Handlers[x.task.Agent], &run{x: x})
	}
	x.mu.Lock()
	x.finishing = true
	x.mu.Unlock()
	finish := p.decide(x, result, err)
	x.endTrace(finish)
	if finish == nil {
		p.done(x)
		p.release()
		return
	}
	x.mu.Lock()
	deadline := x.deadline
	x.mu.Unlock()
	// The worker is free once its finish is queued: the completer writes
	// it, renewing the lease meanwhile. The queue holds at most Workers
	// finishes, so a slow database holds the workers back.
	p.finishes <- &finishRequest{params: finish, x: x, deadline: deadline}
	p.release()
}

// callHandler runs the agent, turning a panic into a retryable error.
func callHandler(ctx context.Context, h taskrun.Handler, r *run) (res taskrun.Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &taskrun.Error{
				Code:      "panic",
				Err:       fmt.Errorf("agent panicked: %v\n%s", v, debug.Stack()),
				Retryable: true,
			}
		}
	}()
	return h.Handle(ctx, r)
}

// decide turns what the agent returned into the write that ends its lease,
// or nil when the lease is already lost.
func (p *Pool) decide(x *execution, result taskrun.Result, err error) *store.TaskFinishParams {
	if x.leaseLost() {
		return nil
	}
	fp := &store.TaskFinishParams{
		Lease: x.lease,
		Actor: store.AgentActor(x.task.ID),
		Now:   p.e.now(),
	}
	cause := context.Cause(x.ctx)
	var ask *taskrun.InputNeeded
	var limited *taskrun.RateLimited
	switch {
	case errors.As(err, &taskrun.Paused{}) && !x.pauseAsked():
		// Stopped for its agent's pause: pending, not paused, so it runs
		// again once the agent is resumed.
		p.deferForAgent(x, fp)
	case errors.As(err, &taskrun.Paused{}):
		// Handed back; the store holds it paused, as was asked.
		fp.Status = store.StatusPending
	case errors.As(err, &taskrun.WaitSubtasks{}):
		fp.Status = store.StatusWaitingSubtasks
	case errors.As(err, &ask) && ask.Question != "":
		fp.Status = store.StatusInputRequired
		fp.Ask = &store.InputAsk{ID: id.New(id.Input), Question: ask.Question, Context: ask.Context, StepNo: int(x.lastStep.Load())}
		if o := x.task.Options; o != nil && o.InputTimeout > 0 {
			fp.Ask.ExpiresAt = p.e.clock.Now().Add(time.Duration(o.InputTimeout))
			fp.Ask.DefaultAnswer = o.InputDefault
		}
	case err == nil:
		fp.Status = store.StatusCompleted
		out, merr := json.Marshal(result)
		if merr != nil {
			fp.Status = store.StatusFailed
			fp.Error = &store.TaskError{Code: "bad_result", Message: "the agent's result is not JSON: " + merr.Error()}
			break
		}
		fp.Result = out
		if err := p.e.completion(context.WithoutCancel(x.ctx), x.task, result, fp); err != nil {
			code, _, _ := taskrun.Classify(err)
			fp.Status, fp.Result, fp.FollowUps, fp.Events = store.StatusFailed, nil, nil, nil
			fp.Error = &store.TaskError{Code: code, Message: err.Error()}
		}
	case errors.Is(cause, taskrun.ErrCancelled):
		fp.Status = store.StatusCancelled
		fp.Error = &store.TaskError{Code: "cancelled", Message: "cancelled while running"}
	case errors.Is(cause, taskrun.ErrShutdown):
		fp.Status = store.StatusPending
		fp.Actor = store.ActorSystem
	case errors.Is(err, taskrun.ErrSpendLimit):
		// Handed back to wait for the guard: the step that could not be
		// paid for runs when the task is claimed again, no sooner than the
		// guard said (a deferral) or once the claim floor lets it (a pause).
		fp.Status = store.StatusPending
		fp.Actor = store.ActorSystem
		x.mu.Lock()
		fp.RunAt = x.spendUntil
		x.mu.Unlock()
	case errors.As(err, &limited):
		// Handed back to wait for the model provider, as for the guard.
		if !p.waitRateLimit(x, limited, fp) {
			return nil
		}
	default:
		p.failAttempt(x, err, fp)
	}
	return fp
}

// failAttempt fills fp for an attempt that failed with err: retried after
// a backoff (or the error's RetryAfter) while it is retryable and attempts
// remain, else failed.
func (p *Pool) failAttempt(x *execution, err error, fp *store.TaskFinishParams) {
	code, retryable, retryAfter := taskrun.Classify(err)
	fp.Error = &store.TaskError{Code: code, Message: err.Error()}
	if !retryable || x.task.Attempt >= x.task.MaxAttempts {
		fp.Status = store.StatusFailed
		return
	}
	fp.Status = store.StatusRetryScheduled
	delay := retryAfter
	if delay <= 0 {
		delay = backoff(x.task.Attempt, p.e.cfg.BackoffBase, p.e.cfg.BackoffCap, jitter)
	}
	fp.RunAt = p.e.clock.Now().Add(delay)
}

// done forgets a task whose lease has ended: its lease is no longer
// renewed.
func (p *Pool) done(x *execution) {
	x.cancel(context.Canceled)
	p.mu.Lock()
	if p.running[x.task.ID] == x {
		delete(p.running, x.task.ID)
	}
	p.mu.Unlock()
}

// release frees a worker whose agent has returned.
func (p *Pool) release() {
	p.mu.Lock()
	p.active--
	p.mu.Unlock()
	select {
	case p.slotFreed <- struct{}{}:
	default:
	}
}

// run is the taskrun.Run an agent gets for one execution.
type run struct{ x *execution }

var _ taskrun.Run = (*run)(nil)

func (r *run) Task() *taskrun.Info { return r.x.info }

// guard turns a write error into ErrLeaseLost handling: the worker stops.
func (r *run) guard(err error) error {
	if errors.Is(err, store.ErrLeaseLost) {
		r.x.loseLease()
	}
	return err
}

func (r *run) Checkpoint(ctx context.Context, state json.RawMessage) error {
	if !r.x.trusted() {
		return store.ErrLeaseLost
	}
	if !json.Valid(state) {
		return errors.New("checkpoint: state is not valid JSON")
	}
	err := r.x.pool.e.store.TaskCheckpoint(ctx, &store.TaskCheckpointParams{
		Lease: r.x.lease, Checkpoint: state, Now: r.x.pool.e.now(),
	})
	return r.guard(err)
}

func (r *run) Progress(ctx context.Context, pr taskrun.Progress) error {
	if !r.x.trusted() {
		return store.ErrLeaseLost
	}
	sp := store.Progress{CurrentStep: pr.Current, TotalSteps: pr.Total, Label: pr.Label}
	if pr.Total > 0 {
		sp.Percentage = min(100, max(0, pr.Current*100/pr.Total))
	}
	err := r.x.pool.e.store.TaskProgress(ctx, &store.TaskProgressParams{
		Lease: r.x.lease, Progress: sp, Actor: store.AgentActor(r.x.task.ID), Now: r.x.pool.e.now(),
	})
	if err == nil {
		r.x.mu.Lock()
		r.x.progress = sp
		r.x.mu.Unlock()
		r.x.pool.e.wrote()
	}
	return r.guard(err)
}

func (r *run) Renew(ctx context.Context) error {
	if !r.x.trusted() {
		return store.ErrLeaseLost
	}
	p := r.x.pool
	sent := p.e.clock.Now()
	res, err := p.e.store.LeaseRenewMany(ctx, &store.LeaseRenewManyParams{
		Leases: []store.Lease{r.x.lease}, TTL: p.e.cfg.LeaseTTL, Now: p.e.now(),
	})
	if err != nil {
		return err
	}
	p.applyRenewal(r.x, res[0], sent)
	if res[0].Err != nil {
		return res[0].Err
	}
	return nil
}

// PauseRequested is also true while the task's agent is paused: the task
// stops after its step, as for a pause of its own.
func (r *run) PauseRequested() bool {
	return r.x.pauseAsked() || r.x.agentPaused()
}

// pauseAsked reports whether a pause of the task itself was asked.
func (x *execution) pauseAsked() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pause
}

func (r *run) BeginStep(ctx context.Context, spec taskrun.StepSpec) (*taskrun.StepRecord, error) {
	if !r.x.trusted() {
		return nil, store.ErrLeaseLost
	}
	if spec.Number < 1 || spec.CallIndex < 0 {
		return nil, fmt.Errorf("begin step: position %d.%d: steps count from 1, calls from 0", spec.Number, spec.CallIndex)
	}
	r.x.lastStep.Store(int64(spec.Number))
	key := taskrun.StepKey(r.x.task.ID, spec.Number, spec.CallIndex)
	res, err := r.x.pool.e.store.StepStart(ctx, &store.StepStartParams{
		Lease: r.x.lease, StepNo: spec.Number, CallIndex: spec.CallIndex, Type: spec.Type, Tool: spec.Tool,
		IdempotencyKey: key, Input: spec.Input, Now: r.x.pool.e.now(),
	})
	if err != nil {
		return nil, r.guard(err)
	}
	st := res.Step
	rec := &taskrun.StepRecord{
		Key:      key,
		Replayed: res.Existed && (st.Status == store.StepDone || st.Status == store.StepDenied),
		Status:   st.Status, Output: st.Output, TokensIn: st.TokensIn, TokensOut: st.TokensOut, CostUSD: st.CostUSD,
	}
	if tr := r.x.trace; tr != nil {
		tr.beginStep(r.x.ctx, spec, rec)
	}
	return rec, nil
}

func (r *run) EndStep(ctx context.Context, key string, res taskrun.StepResult) error {
	if !r.x.trusted() {
		return store.ErrLeaseLost
	}
	version := r.x.takeUnrecorded()
	_, err := r.x.pool.e.store.StepFinish(ctx, &store.StepFinishParams{
		Lease: r.x.lease, IdempotencyKey: key, Status: res.Status, Output: res.Output,
		TokensIn: res.TokensIn, TokensOut: res.TokensOut, CostUSD: res.CostUSD,
		DurationMS: res.Duration.Milliseconds(), ErrorCode: res.ErrorCode, ErrorMessage: res.ErrorMessage,
		Checkpoint: res.Checkpoint, Actor: store.AgentActor(r.x.task.ID), Now: r.x.pool.e.now(),
		Release:      store.Amount{Tokens: res.Release.Tokens, CostUSD: res.Release.CostUSD, ToolCalls: res.Release.ToolCalls},
		AgentVersion: version,
	})
	if tr := r.x.trace; tr != nil {
		tr.endStep(key, &res, err)
	}
	if err == nil {
		crashpoint.Hit(crashpoint.StepFinishCommitted)
		r.x.pool.e.wrote()
		r.x.recorded(version)
		// A pause of its agent written by a process that sends no signal
		// reaches a task that holds its worker here, before its next step.
		r.x.pool.e.refreshPaused(ctx)
	}
	return r.guard(err)
}

func (r *run) Reserve(ctx context.Context, amount taskrun.Amount) error {
	if !r.x.trusted() {
		return store.ErrLeaseLost
	}
	err := r.x.pool.e.store.TaskBudgetReserve(ctx, &store.TaskBudgetReserveParams{
		Lease:  r.x.lease,
		Amount: store.Amount{Tokens: amount.Tokens, CostUSD: amount.CostUSD, ToolCalls: amount.ToolCalls},
		Actor:  store.AgentActor(r.x.task.ID), Now: r.x.pool.e.now(),
	})
	var exceeded *store.BudgetExceededError
	if errors.As(err, &exceeded) {
		r.x.pool.e.wrote()
		return &taskrun.Error{Code: taskrun.CodeBudgetExceeded, Err: exceeded}
	}
	var refused *store.SpendLimitError
	if errors.As(err, &refused) {
		r.x.pool.e.wrote()
		if refused.Reason == store.SpendRefusedTooLarge {
			return &taskrun.Error{Code: taskrun.CodeBudgetExceeded, Err: refused}
		}
		if refused.Reason == store.SpendRefusedNoRoom {
			r.x.mu.Lock()
			r.x.spendUntil = refused.Until
			r.x.mu.Unlock()
		}
		return fmt.Errorf("%w: %w", taskrun.ErrSpendLimit, refused)
	}
	return r.guard(err)
}

// applyRenewal records the outcome of a renewal sent at sent.
func (p *Pool) applyRenewal(x *execution, res store.LeaseRenewResult, sent time.Time) {
	x.mu.Lock()
	finishing := x.finishing
	if res.Err == nil {
		x.deadline = sent.Add(p.e.cfg.LeaseTTL)
	}
	x.mu.Unlock()
	switch {
	case errors.Is(res.Err, store.ErrLeaseLost) && finishing:
		// The finish committed after the renewal's snapshot was taken.
	case errors.Is(res.Err, store.ErrLeaseLost):
		p.logger.Warn("lease lost", slog.String("task_id", x.task.ID))
		x.loseLease()
	case res.Err == nil && res.CancelRequested:
		x.cancel(taskrun.ErrCancelled)
	case res.Err == nil:
		x.mu.Lock()
		x.pause = res.PauseRequested
		x.mu.Unlock()
	}
}

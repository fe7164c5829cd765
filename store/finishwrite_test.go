package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeFinisher is one running task as FinishTask sees it through a
// driver; it records the writes asked of it.
type fakeFinisher struct {
	state        *LeaseState
	openChildren int
	escalated    []*TaskInsertParams
	followUpErr  error
	calls        []string
	plan         *FinishPlan
	events       []*TransitionData
}

func (f *fakeFinisher) LeaseState(context.Context, string) (LeaseState, error) {
	if f.state == nil {
		return LeaseState{}, ErrNotFound
	}
	return *f.state, nil
}

func (f *fakeFinisher) OpenChildren(context.Context, string) (int, error) {
	f.calls = append(f.calls, "children")
	return f.openChildren, nil
}

func (f *fakeFinisher) Escalate(context.Context, *EscalationParams) (json.RawMessage, []*TaskInsertParams, []EventAppend, error) {
	f.calls = append(f.calls, "escalate")
	return json.RawMessage(`{"escalated":1}`), f.escalated, []EventAppend{{TaskID: "tsk_s", Type: "schedule.escalated"}}, nil
}

func (f *fakeFinisher) InsertInputRequest(_ context.Context, _ string, ask *InputAsk, _ time.Time) error {
	f.calls = append(f.calls, "ask "+ask.ID)
	return nil
}

func (f *fakeFinisher) WriteFinish(_ context.Context, _ *TaskFinishParams, plan *FinishPlan, _ time.Time) error {
	f.calls = append(f.calls, "finish "+string(plan.To))
	f.plan = plan
	return nil
}

func (f *fakeFinisher) AppendEvent(_ context.Context, taskID, typ, _ string, data any, _ time.Time) error {
	f.calls = append(f.calls, "event "+taskID+" "+typ)
	if d, ok := data.(*TransitionData); ok {
		f.events = append(f.events, d)
	}
	return nil
}

func (f *fakeFinisher) InsertFollowUp(_ context.Context, p *TaskInsertParams) error {
	f.calls = append(f.calls, "follow-up "+p.ID)
	return f.followUpErr
}

func (f *fakeFinisher) RelateFollowUp(_ context.Context, followUpID, taskID string) error {
	f.calls = append(f.calls, "relate "+followUpID+" "+taskID)
	return nil
}

func (f *fakeFinisher) InsertMemory(_ context.Context, m *MemoryInsertParams, _ time.Time) error {
	f.calls = append(f.calls, "memory "+m.ID)
	return nil
}

func (f *fakeFinisher) TaskEnded(_ context.Context, taskID string, _ time.Time) error {
	f.calls = append(f.calls, "ended "+taskID)
	return nil
}

func TestFinishTask(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	later := at.Add(time.Minute + time.Nanosecond)
	lease := Lease{TaskID: "tsk_1", Token: 3}
	running := func() *LeaseState {
		return &LeaseState{FinishLease: FinishLease{Status: StatusRunning, Token: 3}, Attempt: 2}
	}
	completed := TaskFinishParams{Lease: lease, Status: StatusCompleted, Actor: "w",
		FollowUps: []*TaskInsertParams{{ID: "tsk_f"}}, Events: []EventAppend{{TaskID: "tsk_x", Type: "x.done"}},
		Memories: []*MemoryInsertParams{{ID: "mem_1"}}}
	for _, c := range []struct {
		name   string
		f      fakeFinisher
		p      TaskFinishParams
		calls  []string
		err    error
		checks func(t *testing.T, f *fakeFinisher)
	}{
		{name: "completion writes its follow-ups, events and memories, then ends",
			f: fakeFinisher{state: running()}, p: completed,
			calls: []string{"finish completed", "event tsk_1 task.completed", "follow-up tsk_f", "relate tsk_f tsk_1",
				"event tsk_x x.done", "memory mem_1", "ended tsk_1"},
			checks: func(t *testing.T, f *fakeFinisher) {
				require.Equal(t, &TransitionData{From: StatusRunning, To: StatusCompleted, Attempt: 2}, f.events[0])
			}},
		{name: "a failure writes none of them",
			f: fakeFinisher{state: running()},
			p: TaskFinishParams{Lease: lease, Status: StatusFailed, Error: &TaskError{Code: "x", Message: "y"},
				FollowUps: completed.FollowUps, Events: completed.Events, Memories: completed.Memories},
			calls: []string{"finish failed", "event tsk_1 task.failed", "ended tsk_1"},
			checks: func(t *testing.T, f *fakeFinisher) {
				require.Equal(t, &TransitionData{From: StatusRunning, To: StatusFailed, Attempt: 2, Error: &TaskError{Code: "x", Message: "y"}}, f.events[0])
			}},
		{name: "a retry's event carries its run_at as stored",
			f: fakeFinisher{state: running()}, p: TaskFinishParams{Lease: lease, Status: StatusRetryScheduled, RunAt: later},
			calls: []string{"finish retry_scheduled", "event tsk_1 task.retry_scheduled"},
			checks: func(t *testing.T, f *fakeFinisher) {
				runAt := later.Truncate(time.Microsecond)
				require.Equal(t, &TransitionData{From: StatusRunning, To: StatusRetryScheduled, Attempt: 2, RunAt: &runAt}, f.events[0])
			}},
		{name: "a handed-back task's event carries no run_at",
			f: fakeFinisher{state: running()}, p: TaskFinishParams{Lease: lease, Status: StatusPending, RunAt: later},
			calls: []string{"finish pending", "event tsk_1 task.released"},
			checks: func(t *testing.T, f *fakeFinisher) {
				require.Nil(t, f.events[0].RunAt)
			}},
		{name: "a question is recorded and named in the event",
			f:     fakeFinisher{state: running()},
			p:     TaskFinishParams{Lease: lease, Status: StatusInputRequired, Ask: &InputAsk{ID: "inp_1", Question: "which?"}},
			calls: []string{"ask inp_1", "finish input_required", "event tsk_1 task.input_required"},
			checks: func(t *testing.T, f *fakeFinisher) {
				require.Equal(t, "inp_1", f.events[0].RequestID)
				require.Equal(t, "which?", f.events[0].Question)
			}},
		{name: "a paused question is still recorded",
			f:     fakeFinisher{state: &LeaseState{FinishLease: FinishLease{Status: StatusRunning, Token: 3, PauseRequested: true}}},
			p:     TaskFinishParams{Lease: lease, Status: StatusInputRequired, Ask: &InputAsk{ID: "inp_1", Question: "which?"}},
			calls: []string{"ask inp_1", "finish paused", "event tsk_1 task.paused"},
			checks: func(t *testing.T, f *fakeFinisher) {
				require.Equal(t, StatusInputRequired, f.plan.Effective)
				require.Equal(t, "inp_1", f.events[0].RequestID)
			}},
		{name: "waiting counts the children",
			f: fakeFinisher{state: running(), openChildren: 1}, p: TaskFinishParams{Lease: lease, Status: StatusWaitingSubtasks},
			calls: []string{"children", "finish waiting_subtasks", "event tsk_1 task.waiting_subtasks"}},
		{name: "an escalating scout's tasks and events join its follow-ups",
			f: fakeFinisher{state: running(), escalated: []*TaskInsertParams{{ID: "tsk_e"}}},
			p: TaskFinishParams{Lease: lease, Status: StatusCompleted, FollowUps: []*TaskInsertParams{{ID: "tsk_f"}},
				Escalation: &EscalationParams{}},
			calls: []string{"escalate", "finish completed", "event tsk_1 task.completed", "follow-up tsk_f", "relate tsk_f tsk_1",
				"follow-up tsk_e", "relate tsk_e tsk_1", "event tsk_s schedule.escalated", "ended tsk_1"},
			checks: func(t *testing.T, f *fakeFinisher) {
				require.JSONEq(t, `{"escalated":1}`, string(f.plan.Result))
			}},
		{name: "a cancelled scout does not escalate",
			f:     fakeFinisher{state: &LeaseState{FinishLease: FinishLease{Status: StatusRunning, Token: 3, CancelRequested: true}}},
			p:     TaskFinishParams{Lease: lease, Status: StatusFailed, Escalation: &EscalationParams{}},
			calls: []string{"finish cancelled", "event tsk_1 task.cancelled", "ended tsk_1"}},
		{name: "a finished lease writes nothing",
			f: fakeFinisher{state: &LeaseState{FinishLease: FinishLease{Status: StatusCompleted, Token: 3}}}, p: completed},
		{name: "a stale lease", f: fakeFinisher{state: &LeaseState{FinishLease: FinishLease{Status: StatusRunning, Token: 4}}},
			p: completed, err: ErrLeaseLost},
		{name: "an unknown task", p: completed, err: ErrNotFound},
		{name: "a follow-up that cannot be written fails the batch",
			f: fakeFinisher{state: running(), followUpErr: ErrNotFound}, p: completed,
			err: errors.New("follow-up task tsk_f: " + ErrNotFound.Error())},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.f
			err := FinishTask(context.Background(), &f, &c.p, at)
			if c.err != nil {
				require.ErrorContains(t, err, c.err.Error())
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.calls, f.calls)
			if c.checks != nil {
				c.checks(t, &f)
			}
		})
	}
}

func TestFinishOutcome(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, c := range []struct {
		err            error
		outcome, fatal error
	}{
		{nil, nil, nil},
		{ErrLeaseLost, ErrLeaseLost, nil},
		{fmt.Errorf("x: %w", ErrNotFound), fmt.Errorf("x: %w", ErrNotFound), nil},
		{&TransitionError{TaskID: "tsk_1", From: StatusRunning, To: StatusBlocked}, &TransitionError{TaskID: "tsk_1", From: StatusRunning, To: StatusBlocked}, nil},
		{boom, nil, boom},
		{fmt.Errorf("follow-up task tsk_f: %v", ErrNotFound), nil, fmt.Errorf("follow-up task tsk_f: %v", ErrNotFound)},
	} {
		outcome, fatal := FinishOutcome(c.err)
		require.Equal(t, c.outcome, outcome)
		require.Equal(t, c.fatal, fatal)
	}
}

func TestFinishEach(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	running := &LeaseState{FinishLease: FinishLease{Status: StatusRunning, Token: 1}}
	ok := &TaskFinishParams{Lease: Lease{TaskID: "tsk_ok", Token: 1}, Status: StatusCompleted}
	stale := &TaskFinishParams{Lease: Lease{TaskID: "tsk_stale", Token: 9}, Status: StatusCompleted}
	gone := &TaskFinishParams{Lease: Lease{TaskID: "tsk_gone", Token: 1}, Status: StatusCompleted}
	boom := errors.New("boom")
	fatal := &TaskFinishParams{Lease: Lease{TaskID: "tsk_fatal", Token: 1}, Status: StatusCompleted,
		FollowUps: []*TaskInsertParams{{ID: "tsk_f"}}}
	finishers := map[string]*fakeFinisher{
		"tsk_ok": {state: running}, "tsk_stale": {state: running}, "tsk_gone": {},
		"tsk_fatal": {state: running, followUpErr: boom},
	}
	var nows []*time.Time
	now := func(p *time.Time) time.Time { nows = append(nows, p); return at }
	x := func(p *TaskFinishParams) TaskFinisher { return finishers[p.Lease.TaskID] }

	results := make([]error, 3)
	require.NoError(t, FinishEach(t.Context(), []*TaskFinishParams{ok, stale, gone}, results, now, x))
	require.NoError(t, results[0])
	require.ErrorIs(t, results[1], ErrLeaseLost)
	require.ErrorIs(t, results[2], ErrNotFound)
	require.Len(t, nows, 3)

	results = make([]error, 2)
	require.EqualError(t, FinishEach(t.Context(), []*TaskFinishParams{fatal, ok}, results, now, x), "follow-up task tsk_f: boom")
	require.Equal(t, []error{nil, nil}, results)
}

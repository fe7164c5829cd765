package store

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPlanFinish(t *testing.T) {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	later := at.Add(time.Minute)
	running := FinishLease{Status: StatusRunning, Token: 3}
	noChildren := func() (int, error) { return 0, nil }
	someChildren := func() (int, error) { return 2, nil }
	for _, c := range []struct {
		name     string
		p        TaskFinishParams
		l        FinishLease
		children func() (int, error)
		want     FinishPlan
		err      error
	}{
		{name: "completed", p: TaskFinishParams{Status: StatusCompleted}, l: running,
			want: FinishPlan{To: StatusCompleted, Effective: StatusCompleted, Finished: true}},
		{name: "stale token", p: TaskFinishParams{Status: StatusCompleted}, l: FinishLease{Status: StatusRunning, Token: 4}, err: ErrLeaseLost},
		{name: "token 0", p: TaskFinishParams{Lease: Lease{Token: 0}, Status: StatusCompleted}, l: FinishLease{Status: StatusRunning}, err: ErrLeaseLost},
		{name: "already finished", p: TaskFinishParams{Status: StatusCompleted}, l: FinishLease{Status: StatusCompleted, Token: 3},
			want: FinishPlan{Done: true}},
		{name: "cancel requested wins over failure", p: TaskFinishParams{Status: StatusFailed, Error: &TaskError{Code: "x"}},
			l:    FinishLease{Status: StatusRunning, Token: 3, CancelRequested: true, CancelReason: "stop"},
			want: FinishPlan{To: StatusCancelled, Effective: StatusCancelled, Error: CancelError("stop"), Finished: true}},
		{name: "completion wins over a cancel request", p: TaskFinishParams{Status: StatusCompleted},
			l:    FinishLease{Status: StatusRunning, Token: 3, CancelRequested: true},
			want: FinishPlan{To: StatusCompleted, Effective: StatusCompleted, Finished: true}},
		{name: "retry at its time", p: TaskFinishParams{Status: StatusRetryScheduled, RunAt: later}, l: running,
			want: FinishPlan{To: StatusRetryScheduled, Effective: StatusRetryScheduled, RunAt: later}},
		{name: "retry now", p: TaskFinishParams{Status: StatusRetryScheduled}, l: running,
			want: FinishPlan{To: StatusRetryScheduled, Effective: StatusRetryScheduled, RunAt: at}},
		{name: "handed back", p: TaskFinishParams{Status: StatusPending}, l: running,
			want: FinishPlan{To: StatusPending, Effective: StatusPending, RunAt: at, Released: 1}},
		{name: "handed back until later", p: TaskFinishParams{Status: StatusPending, RunAt: later}, l: running,
			want: FinishPlan{To: StatusPending, Effective: StatusPending, RunAt: later, Released: 1}},
		{name: "handed back, a past run_at is now", p: TaskFinishParams{Status: StatusPending, RunAt: at.Add(-time.Hour)}, l: running,
			want: FinishPlan{To: StatusPending, Effective: StatusPending, RunAt: at, Released: 1}},
		{name: "waits for children", p: TaskFinishParams{Status: StatusWaitingSubtasks}, l: running, children: someChildren,
			want: FinishPlan{To: StatusWaitingSubtasks, Effective: StatusWaitingSubtasks, Released: 1}},
		{name: "no children to wait for", p: TaskFinishParams{Status: StatusWaitingSubtasks}, l: running, children: noChildren,
			want: FinishPlan{To: StatusPending, Effective: StatusPending, RunAt: at, Released: 1}},
		{name: "pause takes a retry's place", p: TaskFinishParams{Status: StatusRetryScheduled, RunAt: later},
			l:    FinishLease{Status: StatusRunning, Token: 3, PauseRequested: true},
			want: FinishPlan{To: StatusPaused, Effective: StatusRetryScheduled, RunAt: later}},
		{name: "pause does not take an end's place", p: TaskFinishParams{Status: StatusCompleted},
			l:    FinishLease{Status: StatusRunning, Token: 3, PauseRequested: true},
			want: FinishPlan{To: StatusCompleted, Effective: StatusCompleted, Finished: true}},
		{name: "a question needs an id", p: TaskFinishParams{Status: StatusInputRequired, Ask: &InputAsk{Question: "?"}}, l: running,
			err: errors.New("input_required needs a question with an id")},
		{name: "asks", p: TaskFinishParams{Status: StatusInputRequired, Ask: &InputAsk{ID: "inp_1", Question: "?"}}, l: running,
			want: FinishPlan{To: StatusInputRequired, Effective: StatusInputRequired, Released: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			if p.Lease.Token == 0 && c.name != "token 0" {
				p.Lease = Lease{TaskID: "tsk_1", Token: 3}
			}
			children := c.children
			if children == nil {
				children = func() (int, error) { t.Fatal("children counted"); return 0, nil }
			}
			got, err := PlanFinish(&p, c.l, at, children)
			if c.err != nil {
				require.ErrorContains(t, err, c.err.Error())
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestAttemptOpen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status, pausedFrom Status
		want               int
	}{
		{StatusInputRequired, "", 1},
		{StatusWaitingSubtasks, "", 1},
		{StatusPaused, StatusInputRequired, 1},
		{StatusPaused, StatusWaitingSubtasks, 1},
		{StatusPaused, StatusPending, 0},
		{StatusPending, "", 0},
		{StatusRunning, "", 0},
		{StatusFailed, "", 0},
	} {
		require.Equal(t, tc.want, AttemptOpen(tc.status, tc.pausedFrom), "%s from %s", tc.status, tc.pausedFrom)
	}
}

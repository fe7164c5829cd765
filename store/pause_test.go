package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPlanPause(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		st     PauseState
		strict bool
		want   PauseAction
		err    bool
	}{
		{name: "pending pauses", st: PauseState{Status: StatusPending}, want: PauseChange},
		{name: "blocked pauses", st: PauseState{Status: StatusBlocked}, strict: true, want: PauseChange},
		{name: "paused stays", st: PauseState{Status: StatusPaused}, strict: true, want: PauseNone},
		{name: "running is asked", st: PauseState{Status: StatusRunning}, want: PauseRequest},
		{name: "running asked once", st: PauseState{Status: StatusRunning, PauseRequested: true}, want: PauseNone},
		{name: "an ended task named is refused", st: PauseState{Status: StatusCompleted}, strict: true, err: true},
		{name: "an ended descendant is left alone", st: PauseState{Status: StatusFailed}, want: PauseNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := PlanPause("tsk_a", c.st, c.strict)
			if c.err {
				require.ErrorIs(t, err, ErrIllegalTransition)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestPlanResume(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		st     PauseState
		strict bool
		want   PauseAction
		err    bool
	}{
		{name: "paused resumes", st: PauseState{Status: StatusPaused}, strict: true, want: PauseChange},
		{name: "a pause request is withdrawn", st: PauseState{Status: StatusRunning, PauseRequested: true}, strict: true, want: PauseRequest},
		{name: "running without a request is refused", st: PauseState{Status: StatusRunning}, strict: true, err: true},
		{name: "a pending task named is refused", st: PauseState{Status: StatusPending}, strict: true, err: true},
		{name: "a pending descendant is left alone", st: PauseState{Status: StatusPending}, want: PauseNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := PlanResume("tsk_a", c.st, c.strict)
			if c.err {
				var te *TransitionError
				require.ErrorAs(t, err, &te)
				require.Equal(t, &TransitionError{TaskID: "tsk_a", From: c.st.Status, To: StatusPending, Action: ActionResume}, te)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestResumedTo(t *testing.T) {
	t.Parallel()
	require.Equal(t, StatusBlocked, ResumedTo(string(StatusBlocked)))
	require.Equal(t, StatusWaitingSubtasks, ResumedTo(string(StatusWaitingSubtasks)))
	require.Equal(t, StatusPending, ResumedTo(""), "an old pause without a status resumes pending")
	require.Equal(t, StatusPending, ResumedTo("bogus"))
}

package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A refused move says what was asked and why it cannot be done.
func TestTransitionErrorSaysWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  TransitionError
		want string
	}{
		{TransitionError{TaskID: "tsk_1", From: StatusCompleted, To: StatusCancelled, Action: ActionCancel},
			"errand: task tsk_1 is already completed; there is nothing to cancel"},
		{TransitionError{TaskID: "tsk_1", From: StatusCompleted, To: StatusPending, Action: ActionRetry},
			"errand: task tsk_1 is completed; only a failed task can be retried"},
		{TransitionError{TaskID: "tsk_1", From: StatusRunning, To: StatusPending, Action: ActionResume},
			"errand: task tsk_1 is running, not paused; there is nothing to resume"},
		{TransitionError{TaskID: "tsk_1", From: StatusFailed, To: StatusPaused, Action: ActionPause},
			"errand: task tsk_1 is already failed; there is nothing to pause"},
		{TransitionError{TaskID: "tsk_1", From: StatusCancelled, To: StatusPending, Action: ActionAnswer},
			"errand: task tsk_1 is cancelled; it is not waiting for an answer"},
		{TransitionError{TaskID: "tsk_1", From: StatusBlocked, To: StatusPaused, Action: ActionPause},
			"errand: task tsk_1 is blocked; it cannot be paused now"},
		{TransitionError{TaskID: "tsk_1", From: StatusRunning, To: StatusBlocked},
			"errand: task tsk_1 is running and cannot become blocked"},
	} {
		require.Equal(t, tc.want, tc.err.Error())
	}
}

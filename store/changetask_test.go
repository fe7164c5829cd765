package store

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// taskMap reads tasks by id.
type taskMap map[string]*Task

func (m taskMap) TaskByID(_ context.Context, id string) (*Task, error) {
	if t, ok := m[id]; ok {
		return t, nil
	}
	return nil, ErrNotFound
}

func TestChangeTask(t *testing.T) {
	t.Parallel()
	errChange := errors.New("refused")
	tests := []struct {
		name   string
		id     string
		change error
		want   *Task
		err    error
	}{
		{name: "the task as changed", id: "tsk_1", want: &Task{ID: "tsk_1", Status: StatusPaused}},
		{name: "a refused change reads nothing", id: "tsk_1", change: errChange, err: errChange},
		{name: "a task gone", id: "tsk_2", err: ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := taskMap{"tsk_1": {ID: "tsk_1", Status: StatusPending}}
			got, err := ChangeTask(t.Context(), x, tc.id, func() error {
				if tc.change == nil {
					x["tsk_1"].Status = StatusPaused
				}
				return tc.change
			})
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, tc.want, got)
		})
	}
}

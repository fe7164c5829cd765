package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type startedEvent struct {
	taskID, typ, actor string
	data               TransitionData
}

// fakeAppender records the events appended, failing from the failAt-th
// (1-based; 0 never fails).
type fakeAppender struct {
	events []startedEvent
	failAt int
}

func (f *fakeAppender) AppendEvent(_ context.Context, taskID, typ, actor string, data any, _ time.Time) error {
	if f.failAt != 0 && len(f.events)+1 == f.failAt {
		return errors.New("append failed")
	}
	f.events = append(f.events, startedEvent{taskID, typ, actor, *data.(*TransitionData)})
	return nil
}

func TestAppendStarted(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	claimed := []*Task{{ID: "tsk_b", Attempt: 1}, {ID: "tsk_a", Attempt: 3}}
	from := map[string]Status{"tsk_a": StatusPending, "tsk_b": StatusBlocked}
	started := func(id string, from Status, attempt int) startedEvent {
		return startedEvent{id, EventTaskStarted, ActorSystem,
			TransitionData{From: from, To: StatusRunning, Attempt: attempt, Owner: "w1"}}
	}
	tests := []struct {
		name    string
		claimed []*Task
		failAt  int
		want    []startedEvent
		err     bool
	}{
		{name: "none claimed", want: nil},
		{name: "each in the order given", claimed: claimed,
			want: []startedEvent{started("tsk_b", StatusBlocked, 1), started("tsk_a", StatusPending, 3)}},
		{name: "a failed append stops", claimed: claimed, failAt: 2,
			want: []startedEvent{started("tsk_b", StatusBlocked, 1)}, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeAppender{failAt: tc.failAt}
			err := AppendStarted(t.Context(), f, tc.claimed, from, "w1", at)
			require.Equal(t, tc.err, err != nil)
			require.Equal(t, tc.want, f.events)
		})
	}
}

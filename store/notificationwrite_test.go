package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEventNotificationText(t *testing.T) {
	t.Parallel()
	top := NotificationTarget{TopLevel: true, Session: "s1", Title: "Research X"}
	failed := &TransitionData{Error: &TaskError{Code: "boom", Message: "it broke"}}
	for _, tc := range []struct {
		name   string
		target NotificationTarget
		typ    string
		td     *TransitionData
		raw    string
		want   string // "" for no notification
	}{
		{name: "Failed", target: top, typ: EventTaskFailed, td: failed, want: "[Task failed] 'Research X' — boom: it broke"},
		{name: "Subtask", target: NotificationTarget{Title: "Research X"}, typ: EventTaskFailed, td: failed},
		{name: "SilentRoute", target: NotificationTarget{TopLevel: true, Route: ResultRouteSilent, Title: "Research X"}, typ: EventTaskFailed, td: failed},
		{name: "ChainKeepsCompletionQuiet", target: NotificationTarget{TopLevel: true, Route: ResultRouteChain}, typ: EventTaskCompleted},
		{name: "ChainLetsFailureThrough", target: NotificationTarget{TopLevel: true, Route: ResultRouteChain, Title: "Research X"}, typ: EventTaskFailed, td: failed,
			want: "[Task failed] 'Research X' — boom: it broke"},
		{name: "AlertWhateverTheRoute", target: NotificationTarget{TopLevel: true, Route: ResultRouteSilent, Title: "Heartbeat"}, typ: EventAlert,
			raw: `{"message":"over budget"}`, want: "[Alert] 'Heartbeat' — over budget"},
		{name: "DataReadFromRaw", target: top, typ: EventTaskInputRequired, raw: `{"question":"which one?"}`,
			want: "[Input required] 'Research X' — which one?"},
		{name: "OtherPayload", target: top, typ: EventTaskCancelled, raw: `[1,2]`, want: "[Task cancelled] 'Research X'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := EventNotificationText(tc.target, tc.typ, tc.td, []byte(tc.raw))
			require.Equal(t, tc.want != "", ok)
			require.Equal(t, tc.want, got)
		})
	}
}

// fakeAcker knows notifications 1 to 5 and records the acks made.
type fakeAcker struct{ acks []string }

func (f *fakeAcker) NotificationsUnknown(_ context.Context, ids []int64) ([]int64, error) {
	var unknown []int64
	for _, id := range ids {
		if id < 1 || id > 5 {
			unknown = append(unknown, id)
		}
	}
	return unknown, nil
}

func (f *fakeAcker) NotificationAckIDs(_ context.Context, ids []int64, _ time.Time) (int64, error) {
	f.acks = append(f.acks, "ids")
	return int64(len(ids)), nil
}

func (f *fakeAcker) NotificationAckUpTo(_ context.Context, upTo int64, session string, _ time.Time) (int64, error) {
	f.acks = append(f.acks, "up to "+session)
	return upTo, nil
}

func TestAckNotifications(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		p       NotificationAckParams
		want    int
		unknown []int64
		acks    []string
	}{
		{name: "IDs", p: NotificationAckParams{IDs: []int64{1, 3}}, want: 2, acks: []string{"ids"}},
		{name: "UnknownIDsMarkNothing", p: NotificationAckParams{IDs: []int64{9, 1, 7}}, unknown: []int64{9, 7}},
		{name: "UpTo", p: NotificationAckParams{UpToID: 4, SessionID: "s1"}, want: 4, acks: []string{"up to s1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeAcker{}
			n, err := AckNotifications(context.Background(), f, &tc.p, at)
			if tc.unknown != nil {
				require.ErrorIs(t, err, ErrNotFound)
				require.Equal(t, &NotificationUnknownError{IDs: tc.unknown}, err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, n)
			require.Equal(t, tc.acks, f.acks)
		})
	}
}

func TestCheckCursorSet(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckCursorSet(&CursorSetParams{Name: "webhook:x"}))
	require.EqualError(t, CheckCursorSet(&CursorSetParams{}), "a name is required")
}

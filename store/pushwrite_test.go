package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckPushConfigPut(t *testing.T) {
	t.Parallel()
	ok := PushConfig{TaskID: "tsk_1", ID: "c1", URL: "https://hooks.example.com/x", ProtocolVersion: "1.0"}
	require.NoError(t, CheckPushConfigPut(&PushConfigPutParams{Config: ok}))
	noURL := ok
	noURL.URL = ""
	err := CheckPushConfigPut(&PushConfigPutParams{Config: noURL})
	require.ErrorIs(t, err, ErrPushConfigInvalid)
	require.EqualError(t, err, "errand: invalid push config: push config url is required")
}

// fakePushWriter knows task tsk_1 and records the events written.
type fakePushWriter struct{ events []string }

func (f *fakePushWriter) PushConfigUpsert(_ context.Context, c *PushConfig, at time.Time) (*PushConfig, error) {
	if c.TaskID != "tsk_1" {
		return nil, ErrNotFound
	}
	out := *c
	out.CreatedAt, out.UpdatedAt = at, at
	return &out, nil
}

func (f *fakePushWriter) AppendEvent(_ context.Context, taskID, typ, actor string, _ any, _ time.Time) error {
	f.events = append(f.events, taskID+" "+typ+" "+actor)
	return nil
}

func TestPutPushConfig(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		taskID string
		err    error
		events []string
	}{
		{"Writes", "tsk_1", nil, []string{"tsk_1 a2a.push_config_set user"}},
		{"UnknownTask", "tsk_9", &ReferenceError{Field: "task_id", ID: "tsk_9"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakePushWriter{}
			p := &PushConfigPutParams{Config: PushConfig{TaskID: tc.taskID, ID: "c1"}, Actor: "user"}
			got, err := PutPushConfig(context.Background(), f, p, at)
			if tc.err != nil {
				require.Equal(t, tc.err, err)
				require.ErrorIs(t, err, ErrNotFound)
				require.Nil(t, got)
			} else {
				require.NoError(t, err)
				require.Equal(t, at, got.UpdatedAt)
			}
			require.Equal(t, tc.events, f.events)
		})
	}
}

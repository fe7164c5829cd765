package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeLeaseWriter holds one task, tsk_1, and records what is written.
type fakeLeaseWriter struct {
	known   bool // tsk_1 exists
	changed bool // the token-checked write matched it
	calls   []string
}

func (f *fakeLeaseWriter) LeaseState(_ context.Context, id string) (LeaseState, error) {
	f.calls = append(f.calls, "state "+id)
	if !f.known {
		return LeaseState{}, ErrNotFound
	}
	return LeaseState{FinishLease: FinishLease{Status: StatusRunning, Token: 2}}, nil
}

func (f *fakeLeaseWriter) WriteCheckpoint(_ context.Context, l Lease, cp json.RawMessage, _ time.Time) (bool, error) {
	f.calls = append(f.calls, "checkpoint "+l.TaskID+" "+string(cp))
	return f.changed, nil
}

func (f *fakeLeaseWriter) WriteProgress(_ context.Context, l Lease, progress []byte, _ time.Time) (bool, error) {
	f.calls = append(f.calls, "progress "+l.TaskID+" "+string(progress))
	return f.changed, nil
}

func (f *fakeLeaseWriter) AppendEvent(_ context.Context, taskID, typ, _ string, _ any, _ time.Time) error {
	f.calls = append(f.calls, typ+" "+taskID)
	return nil
}

func TestSaveCheckpointAndProgress(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := Lease{TaskID: "tsk_1", Token: 1}
	tests := []struct {
		name     string
		f        fakeLeaseWriter
		progress bool
		err      error
		calls    []string
	}{
		{name: "checkpoint stored", f: fakeLeaseWriter{known: true, changed: true}, calls: []string{`checkpoint tsk_1 {"n":1}`}},
		{name: "checkpoint of a stale lease", f: fakeLeaseWriter{known: true}, err: ErrLeaseLost,
			calls: []string{`checkpoint tsk_1 {"n":1}`, "state tsk_1"}},
		{name: "checkpoint of an unknown task", err: ErrNotFound, calls: []string{`checkpoint tsk_1 {"n":1}`, "state tsk_1"}},
		{name: "progress stored and journaled", f: fakeLeaseWriter{known: true, changed: true}, progress: true,
			calls: []string{`progress tsk_1 {"p":1}`, EventTaskProgress + " tsk_1"}},
		{name: "progress of a stale lease is not journaled", f: fakeLeaseWriter{known: true}, progress: true, err: ErrLeaseLost,
			calls: []string{`progress tsk_1 {"p":1}`, "state tsk_1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tc.f
			var err error
			if tc.progress {
				err = SaveProgress(t.Context(), &f, &TaskProgressParams{Lease: lease}, []byte(`{"p":1}`), at)
			} else {
				err = SaveCheckpoint(t.Context(), &f, &TaskCheckpointParams{Lease: lease, Checkpoint: json.RawMessage(`{"n":1}`)}, at)
			}
			require.ErrorIs(t, err, tc.err)
			if tc.err == nil {
				require.NoError(t, err)
			}
			require.Equal(t, tc.calls, f.calls)
		})
	}
}

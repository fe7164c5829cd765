package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecodeMemoryJSON(t *testing.T) {
	t.Parallel()
	flag := `{"reason":"reads as instructions","by":"rules","at":"2026-11-24T12:00:00Z"}`
	for _, tc := range []struct {
		name    string
		tags    string
		flag    *string
		want    Memory
		errText string
	}{
		{name: "NoTags", tags: `null`, want: Memory{ID: "mem_1", Tags: []string{}}},
		{name: "Tags", tags: `["a","b"]`, want: Memory{ID: "mem_1", Tags: []string{"a", "b"}}},
		{name: "Flagged", tags: `[]`, flag: &flag, want: Memory{ID: "mem_1", Tags: []string{},
			Flagged: &MemoryFlag{Reason: "reads as instructions", By: MemoryFlaggedByRules, At: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}}},
		{name: "BadTags", tags: `{`, errText: "memory mem_1 tags: unexpected end of JSON input"},
		{name: "BadFlag", tags: `[]`, flag: new(string), errText: "memory mem_1 flag: unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := Memory{ID: "mem_1"}
			err := DecodeMemoryJSON(&m, tc.tags, tc.flag)
			if tc.errText != "" {
				require.EqualError(t, err, tc.errText)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, m)
		})
	}
}

func TestMemoryFlagJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	require.Nil(t, MemoryFlagJSON(nil, at))
	require.JSONEq(t, `{"reason":"r","by":"model","at":"2026-11-24T11:00:00.123456Z"}`,
		*MemoryFlagJSON(&MemoryFlag{Reason: "r", By: MemoryFlaggedByModel}, at), "unset: at, in UTC, to the microsecond")
	own := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	require.JSONEq(t, `{"reason":"r","by":"rules","at":"2026-01-02T03:04:05.000006Z"}`,
		*MemoryFlagJSON(&MemoryFlag{Reason: "r", By: MemoryFlaggedByRules, At: own}, at), "its own time kept")
}

func TestMemoryVector(t *testing.T) {
	t.Parallel()
	b, err := MemoryVector(nil)
	require.NoError(t, err)
	require.Nil(t, b, "no vector is NULL")
	b, err = MemoryVector([]float32{1, 0})
	require.NoError(t, err)
	require.Equal(t, EncodeVector([]float32{1, 0}), b)
	_, err = MemoryVector(make([]float32, MaxEmbeddingDims+1))
	require.EqualError(t, err, "a memory's vector has 8193 numbers; at most 8192 are kept")
}

func TestCheckMemoryWrites(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckMemoryInsert(&MemoryInsertParams{ID: "m", Text: "t", Source: "user"}))
	for _, p := range []MemoryInsertParams{{Text: "t", Source: "user"}, {ID: "m", Source: "user"}, {ID: "m", Text: "t"}} {
		require.EqualError(t, CheckMemoryInsert(&p), "a memory needs an id, text and a source")
	}
	require.NoError(t, CheckMemoryConflict(&MemoryConflictParams{NewerID: "a", OlderID: "b"}))
	require.EqualError(t, CheckMemoryConflict(&MemoryConflictParams{NewerID: "a"}), "a conflict needs two memory ids")
	require.EqualError(t, CheckMemoryConflict(&MemoryConflictParams{OlderID: "b"}), "a conflict needs two memory ids")
}

func TestPlanMemoryPurge(t *testing.T) {
	t.Parallel()
	before := time.Date(2026, 11, 24, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	beforeUTC := before.UTC()
	for _, tc := range []struct {
		name string
		p    MemoryPurgeParams
		want *MemoryPurgeData
	}{
		{"Nothing", MemoryPurgeParams{}, nil},
		{"Task", MemoryPurgeParams{TaskID: "tsk_1"}, &MemoryPurgeData{TaskID: "tsk_1"}},
		{"AgentAndSource", MemoryPurgeParams{Agent: "a", Source: "user"}, &MemoryPurgeData{Agent: "a", Source: "user"}},
		{"Before", MemoryPurgeParams{CreatedBefore: before}, &MemoryPurgeData{CreatedBefore: &beforeUTC}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := PlanMemoryPurge(&tc.p)
			if tc.want == nil {
				require.ErrorIs(t, err, ErrMemoryPurgeAll)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// fakeMemoryWriter keeps memories by id and records the events written.
type fakeMemoryWriter struct {
	memories map[string]*Memory
	leaseErr error
	conflict bool // MemoryConflictInsert finds the pair recorded
	events   []string
}

func (f *fakeMemoryWriter) LeaseState(context.Context, string) (LeaseState, error) {
	return fakeLeaseState(f.leaseErr != nil), nil
}

func (f *fakeMemoryWriter) MemoryInsertRow(_ context.Context, p *MemoryInsertParams, est int, _ time.Time) (*Memory, bool, error) {
	for _, m := range f.memories {
		if p.IdempotencyKey != "" && m.IdempotencyKey == p.IdempotencyKey {
			return m, false, nil
		}
	}
	m := &Memory{ID: p.ID, TaskID: p.TaskID, IdempotencyKey: p.IdempotencyKey, EstimatedTokens: est, Flagged: p.Flagged}
	f.memories[p.ID] = m
	return m, true, nil
}

func (f *fakeMemoryWriter) get(id string) (*Memory, error) {
	m, ok := f.memories[id]
	if !ok {
		return nil, ErrNotFound
	}
	c := *m
	return &c, nil
}

func (f *fakeMemoryWriter) MemoryRefreshRow(_ context.Context, id, taskID string, at time.Time) (*Memory, error) {
	if _, ok := f.memories[id]; !ok {
		return nil, ErrNotFound
	}
	f.memories[id].RefreshedAt, f.memories[id].RefreshedBy = &at, taskID
	return f.get(id)
}

func (f *fakeMemoryWriter) MemoryFlagRow(_ context.Context, id string, flag *MemoryFlag, _ time.Time) (*Memory, bool, error) {
	m, err := f.get(id)
	if err != nil || m.Flagged != nil {
		return m, false, err
	}
	f.memories[id].Flagged = flag
	m, err = f.get(id)
	return m, true, err
}

func (f *fakeMemoryWriter) MemoryForRelease(_ context.Context, id string) (*Memory, error) {
	return f.get(id)
}

func (f *fakeMemoryWriter) MemoryUnflag(_ context.Context, id string) error {
	f.memories[id].Flagged = nil
	return nil
}

func (f *fakeMemoryWriter) MemoryConflictInsert(context.Context, *MemoryConflictParams, time.Time) (bool, error) {
	return !f.conflict, nil
}

func (f *fakeMemoryWriter) MemoryDeleteRow(_ context.Context, id string) (string, string, error) {
	m, err := f.get(id)
	if err != nil {
		return "", "", err
	}
	delete(f.memories, id)
	return m.TaskID, m.Source, nil
}

func (f *fakeMemoryWriter) AppendEvent(_ context.Context, taskID, typ, _ string, _ any, _ time.Time) error {
	f.events = append(f.events, taskID+" "+typ)
	return nil
}

func TestMemoryWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	flag := MemoryFlag{Reason: "r", By: MemoryFlaggedByRules}
	for _, tc := range []struct {
		name    string
		flagged bool // mem_1 starts flagged
		run     func(f *fakeMemoryWriter) error
		events  []string
	}{
		{name: "Insert", run: func(f *fakeMemoryWriter) error {
			_, err := InsertMemoryFenced(ctx, f, &MemoryInsertParams{ID: "mem_2", Text: "t", Source: "user", TaskID: "tsk_2"}, at)
			return err
		}, events: []string{"tsk_2 memory.created"}},
		{name: "InsertFlagged", run: func(f *fakeMemoryWriter) error {
			_, err := InsertMemoryFenced(ctx, f, &MemoryInsertParams{ID: "mem_2", Text: "t", Source: "user", TaskID: "tsk_2", Flagged: &flag}, at)
			return err
		}, events: []string{"tsk_2 memory.created", "tsk_2 memory.flagged"}},
		{name: "InsertKnownKey", run: func(f *fakeMemoryWriter) error {
			res, err := InsertMemoryFenced(ctx, f, &MemoryInsertParams{ID: "mem_2", Text: "t", Source: "user", IdempotencyKey: "k1"}, at)
			if err == nil && (res.Inserted || res.Memory.ID != "mem_1") {
				return ErrConflict
			}
			return err
		}},
		{name: "InsertLeaseLost", run: func(f *fakeMemoryWriter) error {
			f.leaseErr = ErrLeaseLost
			_, err := InsertMemoryFenced(ctx, f, &MemoryInsertParams{ID: "mem_2", Text: "t", Source: "user", Lease: Lease{TaskID: "tsk_2", Token: 1}}, at)
			if err == ErrLeaseLost {
				return nil
			}
			return ErrConflict
		}},
		{name: "Refresh", run: func(f *fakeMemoryWriter) error {
			m, err := RefreshMemory(ctx, f, &MemoryRefreshParams{ID: "mem_1", TaskID: "tsk_3"}, at)
			if err == nil && m.RefreshedBy != "tsk_3" {
				return ErrConflict
			}
			return err
		}, events: []string{"tsk_3 memory.refreshed"}},
		{name: "Flag", run: func(f *fakeMemoryWriter) error {
			m, err := FlagMemory(ctx, f, &MemoryFlagParams{ID: "mem_1", Flag: flag}, at)
			if err == nil && m.Flagged == nil {
				return ErrConflict
			}
			return err
		}, events: []string{"tsk_1 memory.flagged"}},
		{name: "FlagFlagged", flagged: true, run: func(f *fakeMemoryWriter) error {
			_, err := FlagMemory(ctx, f, &MemoryFlagParams{ID: "mem_1", Flag: flag}, at)
			return err
		}},
		{name: "Release", flagged: true, run: func(f *fakeMemoryWriter) error {
			m, err := ReleaseMemory(ctx, f, &MemoryReleaseParams{ID: "mem_1"}, at)
			if err == nil && m.Flagged != nil {
				return ErrConflict
			}
			return err
		}, events: []string{"tsk_1 memory.released"}},
		{name: "ReleaseUnflagged", run: func(f *fakeMemoryWriter) error {
			_, err := ReleaseMemory(ctx, f, &MemoryReleaseParams{ID: "mem_1"}, at)
			return err
		}},
		{name: "Conflict", run: func(f *fakeMemoryWriter) error {
			ok, err := RecordMemoryConflict(ctx, f, &MemoryConflictParams{NewerID: "mem_2", OlderID: "mem_1", TaskID: "tsk_2"}, at)
			if err == nil && !ok {
				return ErrConflict
			}
			return err
		}, events: []string{"tsk_2 memory.conflict"}},
		{name: "ConflictRecordedAlready", run: func(f *fakeMemoryWriter) error {
			f.conflict = true
			ok, err := RecordMemoryConflict(ctx, f, &MemoryConflictParams{NewerID: "mem_2", OlderID: "mem_1", TaskID: "tsk_2"}, at)
			if err == nil && ok {
				return ErrConflict
			}
			return err
		}},
		{name: "Delete", run: func(f *fakeMemoryWriter) error {
			return DeleteMemory(ctx, f, &MemoryDeleteParams{ID: "mem_1"}, at)
		}, events: []string{"tsk_1 memory.deleted"}},
		{name: "DeleteUnknown", run: func(f *fakeMemoryWriter) error {
			if err := DeleteMemory(ctx, f, &MemoryDeleteParams{ID: "mem_9"}, at); err != ErrNotFound {
				return ErrConflict
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &Memory{ID: "mem_1", TaskID: "tsk_1", IdempotencyKey: "k1"}
			if tc.flagged {
				m.Flagged = &flag
			}
			f := &fakeMemoryWriter{memories: map[string]*Memory{"mem_1": m}}
			require.NoError(t, tc.run(f))
			require.Equal(t, tc.events, f.events)
		})
	}
}

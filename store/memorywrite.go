package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DecodeMemoryJSON fills a memory read from a row with its tags and flag,
// stored as JSON (flag nil for none): no tags are an empty list.
func DecodeMemoryJSON(m *Memory, tags string, flag *string) error {
	if err := json.Unmarshal([]byte(tags), &m.Tags); err != nil {
		return fmt.Errorf("memory %s tags: %w", m.ID, err)
	}
	if m.Tags == nil {
		m.Tags = []string{}
	}
	if flag != nil {
		m.Flagged = new(MemoryFlag)
		if err := json.Unmarshal([]byte(*flag), m.Flagged); err != nil {
			return fmt.Errorf("memory %s flag: %w", m.ID, err)
		}
	}
	return nil
}

// MemoryFlagJSON is how a flag is stored: its JSON, with its time in UTC
// at the stores' microsecond precision (at when unset); nil for none.
func MemoryFlagJSON(f *MemoryFlag, at time.Time) *string {
	if f == nil {
		return nil
	}
	c := *f
	c.At = ClampTime(cmp.Or(c.At, at).UTC().Truncate(time.Microsecond))
	b, _ := json.Marshal(&c) // strings and a time always marshal
	s := string(b)
	return &s
}

// MemoryVector is how a memory's vector is stored: nil (NULL) for none,
// an error beyond MaxEmbeddingDims.
func MemoryVector(v []float32) ([]byte, error) {
	if len(v) == 0 {
		return nil, nil
	}
	if len(v) > MaxEmbeddingDims {
		return nil, fmt.Errorf("a memory's vector has %d numbers; at most %d are kept", len(v), MaxEmbeddingDims)
	}
	return EncodeVector(v), nil
}

// MemoryWriter is a driver's write transaction as the memory writes use
// it: the driver keeps the SQL, the decisions live here.
type MemoryWriter interface {
	LeaseReader
	// MemoryInsertRow writes the memory of p with est tokens, unless its
	// idempotency key names a memory already: then it returns that one
	// with inserted false and writes nothing.
	MemoryInsertRow(ctx context.Context, p *MemoryInsertParams, est int, at time.Time) (m *Memory, inserted bool, err error)
	// MemoryRefreshRow marks the memory refreshed at at by taskID and
	// returns it; ErrNotFound when it does not exist.
	MemoryRefreshRow(ctx context.Context, id, taskID string, at time.Time) (*Memory, error)
	// MemoryFlagRow quarantines the memory unless it is flagged already,
	// and returns it as it stands then; ErrNotFound when it does not exist.
	MemoryFlagRow(ctx context.Context, id string, flag *MemoryFlag, at time.Time) (m *Memory, flagged bool, err error)
	// MemoryForRelease reads the memory, locked where the driver locks;
	// ErrNotFound when it does not exist.
	MemoryForRelease(ctx context.Context, id string) (*Memory, error)
	// MemoryUnflag clears the memory's flag.
	MemoryUnflag(ctx context.Context, id string) error
	// MemoryConflictInsert records a conflict unless it is recorded
	// already, and reports whether it did.
	MemoryConflictInsert(ctx context.Context, p *MemoryConflictParams, at time.Time) (bool, error)
	// MemoryDeleteRow deletes the memory and returns who wrote it;
	// ErrNotFound when it does not exist.
	MemoryDeleteRow(ctx context.Context, id string) (taskID, source string, err error)
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
}

// CheckMemoryInsert refuses a memory without an id, text or source.
func CheckMemoryInsert(p *MemoryInsertParams) error {
	if p.ID == "" || p.Text == "" || p.Source == "" {
		return errors.New("a memory needs an id, text and a source")
	}
	return nil
}

// InsertMemory writes one memory and its events (see Store.MemoryInsert,
// which fences it with the lease first); a known idempotency key returns
// the memory it made.
func InsertMemory(ctx context.Context, x MemoryWriter, p *MemoryInsertParams, at time.Time) (*Memory, bool, error) {
	if err := CheckMemoryInsert(p); err != nil {
		return nil, false, err
	}
	est := EstimateTokens(p.Text, p.Tags)
	m, inserted, err := x.MemoryInsertRow(ctx, p, est, at)
	if err != nil {
		return nil, false, err
	}
	if !inserted {
		return m, false, nil
	}
	err = x.AppendEvent(ctx, p.TaskID, EventMemoryCreated, p.Actor,
		&MemoryEventData{MemoryID: p.ID, Source: p.Source, EstimatedTokens: est}, at)
	if err != nil {
		return nil, false, err
	}
	if p.Flagged != nil {
		err = x.AppendEvent(ctx, p.TaskID, EventMemoryFlagged, p.Actor,
			&MemoryFlagData{MemoryID: p.ID, Reason: p.Flagged.Reason, By: p.Flagged.By}, at)
		if err != nil {
			return nil, false, err
		}
	}
	return m, true, nil
}

// InsertMemoryFenced is InsertMemory behind the check that a lease with
// its Token set is current (see Store.MemoryInsert).
func InsertMemoryFenced(ctx context.Context, x MemoryWriter, p *MemoryInsertParams, at time.Time) (*MemoryInsertResult, error) {
	if p.Lease.Token != 0 {
		if err := HoldLease(ctx, x, p.Lease); err != nil {
			return nil, err
		}
	}
	m, inserted, err := InsertMemory(ctx, x, p, at)
	if err != nil {
		return nil, err
	}
	return &MemoryInsertResult{Memory: m, Inserted: inserted}, nil
}

// RefreshMemory marks a memory confirmed by a task (see
// Store.MemoryRefresh).
func RefreshMemory(ctx context.Context, x MemoryWriter, p *MemoryRefreshParams, at time.Time) (*Memory, error) {
	if p.Lease.Token != 0 {
		if err := HoldLease(ctx, x, p.Lease); err != nil {
			return nil, err
		}
	}
	m, err := x.MemoryRefreshRow(ctx, p.ID, p.TaskID, at)
	if err != nil {
		return nil, err
	}
	err = x.AppendEvent(ctx, p.TaskID, EventMemoryRefreshed, p.Actor, &MemoryRefreshData{MemoryID: p.ID, TaskID: p.TaskID}, at)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// FlagMemory quarantines a memory (see Store.MemoryFlag): one flagged
// already keeps its flag and nothing is journaled.
func FlagMemory(ctx context.Context, x MemoryWriter, p *MemoryFlagParams, at time.Time) (*Memory, error) {
	m, flagged, err := x.MemoryFlagRow(ctx, p.ID, &p.Flag, at)
	if err != nil || !flagged {
		return m, err
	}
	err = x.AppendEvent(ctx, m.TaskID, EventMemoryFlagged, p.Actor,
		&MemoryFlagData{MemoryID: p.ID, Reason: p.Flag.Reason, By: p.Flag.By}, at)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// ReleaseMemory lifts a memory's quarantine (see Store.MemoryRelease): an
// unflagged memory is returned as it is and nothing is journaled.
func ReleaseMemory(ctx context.Context, x MemoryWriter, p *MemoryReleaseParams, at time.Time) (*Memory, error) {
	m, err := x.MemoryForRelease(ctx, p.ID)
	if err != nil || m.Flagged == nil {
		return m, err
	}
	if err := x.MemoryUnflag(ctx, p.ID); err != nil {
		return nil, err
	}
	err = x.AppendEvent(ctx, m.TaskID, EventMemoryReleased, p.Actor,
		&MemoryFlagData{MemoryID: p.ID, Reason: m.Flagged.Reason, By: m.Flagged.By}, at)
	if err != nil {
		return nil, err
	}
	m.Flagged = nil
	return m, nil
}

// CheckMemoryConflict refuses a conflict that does not name two memories.
func CheckMemoryConflict(p *MemoryConflictParams) error {
	if p.NewerID == "" || p.OlderID == "" {
		return errors.New("a conflict needs two memory ids")
	}
	return nil
}

// RecordMemoryConflict records a conflict once per pair and journals it
// (see Store.MemoryConflictRecord).
func RecordMemoryConflict(ctx context.Context, x MemoryWriter, p *MemoryConflictParams, at time.Time) (bool, error) {
	recorded, err := x.MemoryConflictInsert(ctx, p, at)
	if err != nil || !recorded {
		return false, err
	}
	err = x.AppendEvent(ctx, p.TaskID, EventMemoryConflict, p.Actor,
		&MemoryConflictData{NewerID: p.NewerID, OlderID: p.OlderID, Subject: p.Subject}, at)
	if err != nil {
		return false, err
	}
	return true, nil
}

// DeleteMemory deletes a memory and journals it against the task that
// wrote it (see Store.MemoryDelete).
func DeleteMemory(ctx context.Context, x MemoryWriter, p *MemoryDeleteParams, at time.Time) error {
	taskID, source, err := x.MemoryDeleteRow(ctx, p.ID)
	if err != nil {
		return err
	}
	return x.AppendEvent(ctx, taskID, EventMemoryDeleted, p.Actor, &MemoryEventData{MemoryID: p.ID, Source: source}, at)
}

// PlanMemoryPurge is the event data of a purge, its Count left to fill,
// or ErrMemoryPurgeAll when p names nothing to purge by.
func PlanMemoryPurge(p *MemoryPurgeParams) (*MemoryPurgeData, error) {
	data := &MemoryPurgeData{TaskID: p.TaskID, Agent: p.Agent, Source: p.Source}
	if !p.CreatedBefore.IsZero() {
		before := p.CreatedBefore.UTC()
		data.CreatedBefore = &before
	}
	if p.TaskID == "" && p.Agent == "" && p.Source == "" && p.CreatedBefore.IsZero() {
		return nil, ErrMemoryPurgeAll
	}
	return data, nil
}

package store

import (
	"errors"
	"strings"
	"time"
)

// ErrConflict is returned by BatchImport for a row whose id (or unique key)
// the store already holds. Nothing of the batch was written.
var ErrConflict = errors.New("errand: a row with that id exists")

// TaskRecord is a task row as an export holds it: the Task and the columns
// only the store itself reads. Its JSON is the Task's with these fields
// added.
type TaskRecord struct {
	*Task
	// OnDependencyFailure is fail or run; see TaskInsertParams.
	OnDependencyFailure string `json:"on_dependency_failure,omitempty"`
	// CancelReason is the reason of a cancel request, which the task's
	// worker ends it with.
	CancelReason string `json:"cancel_reason,omitempty"`
	// BudgetWarnedAt is when the task.budget_warning event was written.
	BudgetWarnedAt time.Time `json:"budget_warned_at,omitzero"`
	// AttemptOpen says the task's attempt stays open: the next claim goes
	// on with it (see FinishPlan.Released). Absent (an export from before
	// it was kept), it is read from the task's state (see AttemptOpen).
	AttemptOpen *bool `json:"attempt_open,omitempty"`
}

// AttemptOpenOf is the attempt_open value a record imports with.
func (r *TaskRecord) AttemptOpenOf() int {
	switch {
	case r.AttemptOpen == nil:
		return AttemptOpen(r.Status, r.PausedFrom)
	case *r.AttemptOpen:
		return 1
	}
	return 0
}

// InputRecord is an input request row as an export holds it.
type InputRecord struct {
	*InputRequest
	ExpiresAt     time.Time `json:"expires_at,omitzero"`
	DefaultAnswer *string   `json:"default_answer,omitempty"`
}

// Batch is raw rows of every kind, as BatchExport reads them and
// BatchImport writes them.
type Batch struct {
	Tasks         []*TaskRecord
	Steps         []*Step
	Inputs        []*InputRecord
	Dependencies  []*Dependency
	Events        []*Event
	Notifications []*Notification
	Schedules     []*Schedule
	// Memories carry their category, subject, flag and refresh but not
	// their vectors: a vector is derived from the text by the embeddings
	// model, so an import leaves it out (HasEmbedding is ignored) and the
	// engine may embed the memory again.
	Memories []*Memory
}

// ImportedMemoryCategory is the category a memory imports with: its own,
// or for an export from before categories were kept what migrating the
// memory would have given it (a task's result, kept under the key
// "<task id>:result", is a task_result; any other a fact).
func ImportedMemoryCategory(m *Memory) string {
	switch {
	case m.Category != "":
		return m.Category
	case strings.HasSuffix(m.IdempotencyKey, ":result"):
		return CategoryTaskResult
	}
	return CategoryFact
}

// Len counts the rows of every kind.
func (b *Batch) Len() int {
	return len(b.Tasks) + len(b.Steps) + len(b.Inputs) + len(b.Dependencies) + len(b.Events) + len(b.Notifications) + len(b.Schedules) + len(b.Memories)
}

// BatchExportParams selects one page of tasks for an export.
type BatchExportParams struct {
	// After is the id of the last task of the previous page; "" starts at
	// the oldest.
	After string
	// UpdatedSince, when set, keeps only tasks updated at or after it.
	UpdatedSince time.Time
	Limit        int // ≥ 1
}

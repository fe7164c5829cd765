package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
)

// The checks an import makes of each row before it writes it: a row that
// lacks what every row of its kind has is refused, and nothing of the
// batch is written.

// CheckImportTask refuses a task record without an id or with an unknown
// status.
func CheckImportTask(rec *TaskRecord) error {
	if rec == nil || rec.Task == nil || rec.ID == "" {
		return errors.New("task: an id is required")
	}
	if !rec.Status.Valid() {
		return fmt.Errorf("task %s: unknown status %q", rec.ID, rec.Status)
	}
	return nil
}

// CheckImportStep refuses a step without its task or idempotency key.
func CheckImportStep(st *Step) error {
	if st == nil || st.TaskID == "" || st.IdempotencyKey == "" {
		return errors.New("step: task_id and idempotency_key are required")
	}
	return nil
}

// CheckImportInput refuses an input request without an id or task.
func CheckImportInput(rec *InputRecord) error {
	if rec == nil || rec.InputRequest == nil || rec.ID == "" || rec.TaskID == "" {
		return errors.New("input request: id and task_id are required")
	}
	return nil
}

// CheckImportDependency refuses an edge without both ends.
func CheckImportDependency(d *Dependency) error {
	if d == nil || d.TaskID == "" || d.DependsOnID == "" {
		return errors.New("dependency: task_id and depends_on are required")
	}
	return nil
}

// CheckImportEvent refuses an event without a positive id or a type. An
// external event or a schedule's has no task.
func CheckImportEvent(ev *Event) error {
	if ev == nil || ev.ID <= 0 || ev.Type == "" {
		return errors.New("event: a positive id and a type are required")
	}
	return nil
}

// CheckImportSchedule refuses a schedule without an id, name or kind.
func CheckImportSchedule(sc *Schedule) error {
	if sc == nil || sc.ID == "" || sc.Name == "" || sc.Kind == "" {
		return errors.New("schedule: id, name and kind are required")
	}
	return nil
}

// CheckImportMemory refuses a memory without an id, text or source.
func CheckImportMemory(m *Memory) error {
	if m == nil || m.ID == "" || m.Text == "" || m.Source == "" {
		return errors.New("memory: id, text and source are required")
	}
	return nil
}

// CheckImportNotification refuses a notification without a positive id or
// a task.
func CheckImportNotification(n *Notification) error {
	if n == nil || n.ID <= 0 || n.TaskID == "" {
		return errors.New("notification: a positive id and task_id are required")
	}
	return nil
}

// ImportedDependencyKind is the kind an edge imports with: blocks unless
// it names one.
func ImportedDependencyKind(d *Dependency) string { return cmp.Or(d.Kind, DependencyBlocks) }

// ImportedDependencyPolicy is the on_dependency_failure a task record
// imports with: fail unless it names one.
func ImportedDependencyPolicy(rec *TaskRecord) string {
	return cmp.Or(rec.OnDependencyFailure, OnDependencyFailureFail)
}

// TaskJSON is the JSON of a task's optional columns as an import writes
// them: nil (NULL) for each the task does not have.
type TaskJSON struct {
	Progress, Budget, Consumed, Reserved, Options, AgentVersion []byte
	// ForkedFrom and ForkedFromStep are the fork's source columns, nil
	// for a task that is not a fork.
	ForkedFrom     *string
	ForkedFromStep *int
}

// EncodeTaskJSON encodes t's optional columns for an import.
func EncodeTaskJSON(t *Task) (TaskJSON, error) {
	var jsonErr error
	marshal := func(v any, present bool) []byte {
		if !present {
			return nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			jsonErr = err
		}
		return b
	}
	j := TaskJSON{
		Progress: marshal(t.Progress, t.Progress != nil),
		Budget:   marshal(t.Budget, t.Budget != nil),
		Consumed: marshal(t.Consumed, t.Consumed != nil),
		Reserved: marshal(t.Reserved, t.Reserved != nil),
		Options:  marshal(t.Options, t.Options != nil),

		AgentVersion: marshal(t.AgentVersion, t.AgentVersion != nil),
	}
	if f := t.ForkedFrom; f != nil {
		j.ForkedFrom, j.ForkedFromStep = &f.TaskID, &f.StepNo
	}
	if jsonErr != nil {
		return TaskJSON{}, fmt.Errorf("task %s: %w", t.ID, jsonErr)
	}
	return j, nil
}

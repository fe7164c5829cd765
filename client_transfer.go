package errand

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/schedule"
	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/store"
)

// Kinds of the lines of an export.
const (
	ExportKindTask         = "task"
	ExportKindDependency   = "dependency"
	ExportKindStep         = "step"
	ExportKindInput        = "input"
	ExportKindEvent        = "event"
	ExportKindNotification = "notification"
	ExportKindSchedule     = "schedule"
	ExportKindMemory       = "memory"
)

const (
	// exportPageSize is how many tasks an export reads at a time, with
	// their steps, inputs and dependencies.
	exportPageSize = 100
	// exportJournalPage is how many events or notifications it reads at a
	// time.
	exportJournalPage = 1000
	// importBatchRows is how many rows an import writes per transaction.
	importBatchRows = 500
	// maxImportLine bounds one line of an import; a task's checkpoint or a
	// step's output may be large.
	maxImportLine = 64 << 20
	// maxImportID bounds the ids of imported events and notifications: the
	// journal must have ids left to go on with, and JSON clients read ids
	// exactly only up to 2^53-1.
	maxImportID = 1<<53 - 1
)

// exportLine is one line of an export: {"kind": "task", "data": {…}}.
type exportLine struct {
	Kind string `json:"kind"`
	Data any    `json:"data"`
}

// Export writes the store's contents to w as JSON Lines, one
// {"kind": …, "data": {…}} object a line: each task (oldest first, in the
// shape of Task, with the few columns the store keeps besides) followed by
// its dependency edges, steps and input requests; then every event of the
// journal in id order; then the inbox's notifications; then the schedules,
// by name; then the memories, oldest first. Kinds are task, dependency,
// step, input, event, notification, schedule and memory. Import loads it.
//
// With a non-zero since, only tasks updated at or after since (with all
// their rows), and events, notifications and memories written at or after
// since, are exported.
//
// Export reads the store page by page and does not stop its writers: each
// page is consistent, but a store that changes meanwhile may export a task
// as it was before events that follow it in the file. Stop the daemon for a
// snapshot.
func (c *Client) Export(ctx context.Context, w io.Writer, since time.Time) error {
	if !since.IsZero() && !store.TimeInRange(since.UTC()) {
		return &ValidationError{Field: "since", Message: since.UTC().Format(time.RFC3339) + " is outside the years 0001–9999 (UTC)"}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // keep stored JSON byte for byte
	write := func(kind string, data any) error {
		if err := enc.Encode(exportLine{Kind: kind, Data: data}); err != nil {
			return fmt.Errorf("errand: export %s: %w", kind, err)
		}
		return nil
	}

	after := ""
	for {
		page, err := c.store.BatchExport(ctx, &store.BatchExportParams{After: after, UpdatedSince: since, Limit: exportPageSize})
		if err != nil {
			return err
		}
		if len(page.Tasks) == 0 {
			break
		}
		deps := groupByTask(page.Dependencies, func(d *store.Dependency) string { return d.TaskID })
		steps := groupByTask(page.Steps, func(st *store.Step) string { return st.TaskID })
		inputs := groupByTask(page.Inputs, func(in *store.InputRecord) string { return in.TaskID })
		for _, task := range page.Tasks {
			if err := write(ExportKindTask, task); err != nil {
				return err
			}
			for _, d := range deps[task.ID] {
				if err := write(ExportKindDependency, d); err != nil {
					return err
				}
			}
			for _, st := range steps[task.ID] {
				if err := write(ExportKindStep, st); err != nil {
					return err
				}
			}
			for _, in := range inputs[task.ID] {
				if err := write(ExportKindInput, in); err != nil {
					return err
				}
			}
		}
		after = page.Tasks[len(page.Tasks)-1].ID
	}

	var afterID int64
	for {
		evs, err := c.store.EventList(ctx, &store.EventListParams{AfterID: afterID, Since: since, Limit: exportJournalPage})
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if err := write(ExportKindEvent, ev); err != nil {
				return err
			}
		}
		afterID = evs[len(evs)-1].ID
	}

	afterID = 0
	for {
		notes, err := c.store.NotificationList(ctx, &store.NotificationListParams{AfterID: afterID, Since: since, Limit: exportJournalPage})
		if err != nil {
			return err
		}
		if len(notes) == 0 {
			break
		}
		for _, n := range notes {
			if err := write(ExportKindNotification, n); err != nil {
				return err
			}
		}
		afterID = notes[len(notes)-1].ID
	}
	// Schedules are few and have no history of their own to filter by
	// since: all of them go.
	schedules, err := c.store.ScheduleList(ctx, &store.ScheduleListParams{})
	if err != nil {
		return err
	}
	for _, sc := range schedules {
		if err := write(ExportKindSchedule, sc); err != nil {
			return err
		}
	}
	// Memories outlive their tasks: all of them go, not only those of the
	// tasks exported.
	afterMemory := ""
	for {
		ms, err := c.store.MemoryList(ctx, &store.MemoryListParams{Since: since, Cursor: afterMemory, OldestFirst: true, Limit: exportJournalPage})
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if err := write(ExportKindMemory, m); err != nil {
				return err
			}
		}
		afterMemory = ms[len(ms)-1].ID
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("errand: export: %w", err)
	}
	return nil
}

// groupByTask groups rows by their task's id, keeping their order.
func groupByTask[T any](rows []T, taskID func(T) string) map[string][]T {
	out := make(map[string][]T)
	for _, r := range rows {
		out[taskID(r)] = append(out[taskID(r)], r)
	}
	return out
}

// ImportStats counts the rows an import wrote, by kind.
type ImportStats struct {
	Tasks         int `json:"tasks"`
	Steps         int `json:"steps"`
	Events        int `json:"events"`
	Inputs        int `json:"inputs"`
	Dependencies  int `json:"dependencies"`
	Notifications int `json:"notifications"`
	Schedules     int `json:"schedules"`
	Memories      int `json:"memories"`
}

func (s *ImportStats) add(b *store.Batch) {
	s.Tasks += len(b.Tasks)
	s.Steps += len(b.Steps)
	s.Events += len(b.Events)
	s.Inputs += len(b.Inputs)
	s.Dependencies += len(b.Dependencies)
	s.Notifications += len(b.Notifications)
	s.Schedules += len(b.Schedules)
	s.Memories += len(b.Memories)
}

// ErrStoreNotEmpty is returned by Import into a store that holds tasks or
// events already.
var ErrStoreNotEmpty = errors.New("errand: the store is not empty; import into a new store")

// Import loads an export (see Export) into an empty store, ids, statuses
// and times preserved; events keep their ids and later events continue
// after the largest. It refuses a store that holds tasks or events
// (ErrStoreNotEmpty), and a line that is not a well-formed export line of a
// known kind, naming the line.
//
// Import streams: it writes importBatchRows rows per transaction. On an
// error the rows of the transactions that committed stay (the returned
// stats count them, and the store is no longer empty): start again on a
// new store.
func (c *Client) Import(ctx context.Context, r io.Reader) (*ImportStats, error) {
	counts, err := c.store.TaskCountByStatus(ctx)
	if err != nil {
		return nil, err
	}
	var tasks int
	for _, n := range counts {
		tasks += n
	}
	lastEvent, err := c.store.EventLastID(ctx)
	if err != nil {
		return nil, err
	}
	if tasks > 0 || lastEvent > 0 {
		return nil, fmt.Errorf("%w (it holds %d tasks and events up to id %d)", ErrStoreNotEmpty, tasks, lastEvent)
	}

	stats := &ImportStats{}
	batch := &store.Batch{}
	first, lineNo := 0, 0 // the batch's first line, the current line
	flush := func() error {
		if batch.Len() == 0 {
			return nil
		}
		if err := c.store.BatchImport(ctx, batch); err != nil {
			return fmt.Errorf("errand: import lines %d-%d: %w", first, lineNo, err)
		}
		stats.add(batch)
		batch = &store.Batch{}
		return nil
	}

	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxImportLine)
	for sc.Scan() {
		lineNo++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if batch.Len() == 0 {
			first = lineNo
		}
		if err := decodeImportLine(line, batch); err != nil {
			return stats, fmt.Errorf("errand: import line %d: %w", lineNo, err)
		}
		if batch.Len() >= importBatchRows {
			if err := flush(); err != nil {
				return stats, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return stats, fmt.Errorf("errand: import line %d: longer than %d MiB", lineNo+1, maxImportLine>>20)
		}
		return stats, fmt.Errorf("errand: import line %d: %w", lineNo+1, err)
	}
	if err := flush(); err != nil {
		return stats, err
	}
	return stats, nil
}

// decodeImportLine parses one export line and adds its row to batch.
func decodeImportLine(line []byte, batch *store.Batch) error {
	var env struct {
		Kind string          `json:"kind"`
		Data json.RawMessage `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return fmt.Errorf("not an export line {\"kind\": …, \"data\": {…}}: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value on the line")
	}
	if env.Kind == "" {
		return errors.New(`no "kind"`)
	}
	if len(env.Data) == 0 || string(env.Data) == "null" {
		return fmt.Errorf("%s: no \"data\"", env.Kind)
	}
	decode := func(dst any) error {
		if err := json.Unmarshal(env.Data, dst); err != nil {
			return fmt.Errorf("%s: %w", env.Kind, err)
		}
		return nil
	}
	switch env.Kind {
	case ExportKindTask:
		var rec store.TaskRecord
		if err := decode(&rec); err != nil {
			return err
		}
		if rec.Task == nil || rec.ID == "" {
			return errors.New("task: no id")
		}
		if !rec.Status.Valid() {
			return fmt.Errorf("task %s: unknown status %q", rec.ID, rec.Status)
		}
		if !id.Valid(id.Task, rec.ID) {
			// Lists page by task id, and their cursors hold only real ids.
			return fmt.Errorf("task %q: not a task id (tsk_ and 26 base32 digits)", rec.ID)
		}
		batch.Tasks = append(batch.Tasks, &rec)
	case ExportKindDependency:
		var d store.Dependency
		if err := decode(&d); err != nil {
			return err
		}
		if d.TaskID == "" || d.DependsOnID == "" {
			return errors.New("dependency: task_id and depends_on are required")
		}
		batch.Dependencies = append(batch.Dependencies, &d)
	case ExportKindStep:
		var st store.Step
		if err := decode(&st); err != nil {
			return err
		}
		if st.TaskID == "" || st.IdempotencyKey == "" {
			return errors.New("step: task_id and idempotency_key are required")
		}
		batch.Steps = append(batch.Steps, &st)
	case ExportKindInput:
		var rec store.InputRecord
		if err := decode(&rec); err != nil {
			return err
		}
		if rec.InputRequest == nil || rec.ID == "" || rec.TaskID == "" {
			return errors.New("input: id and task_id are required")
		}
		batch.Inputs = append(batch.Inputs, &rec)
	case ExportKindEvent:
		var ev store.Event
		if err := decode(&ev); err != nil {
			return err
		}
		if ev.ID <= 0 || ev.Type == "" {
			return errors.New("event: a positive id and a type are required")
		}
		if ev.ID > maxImportID {
			return fmt.Errorf("event %d: ids go up to %d", ev.ID, int64(maxImportID))
		}
		batch.Events = append(batch.Events, &ev)
	case ExportKindNotification:
		var n store.Notification
		if err := decode(&n); err != nil {
			return err
		}
		if n.ID <= 0 || n.TaskID == "" {
			return errors.New("notification: a positive id and task_id are required")
		}
		if n.ID > maxImportID {
			return fmt.Errorf("notification %d: ids go up to %d", n.ID, int64(maxImportID))
		}
		batch.Notifications = append(batch.Notifications, &n)
	case ExportKindSchedule:
		var sc store.Schedule
		if err := decode(&sc); err != nil {
			return err
		}
		if err := checkImportedSchedule(&sc); err != nil {
			return err
		}
		batch.Schedules = append(batch.Schedules, &sc)
	case ExportKindMemory:
		var m store.Memory
		if err := decode(&m); err != nil {
			return err
		}
		if err := checkImportedMemory(&m); err != nil {
			return err
		}
		batch.Memories = append(batch.Memories, &m)
	default:
		return fmt.Errorf("unknown kind %q (want task, dependency, step, input, event, notification, schedule or memory)", env.Kind)
	}
	return nil
}

// checkImportedMemory refuses a memory row the API could not have written.
func checkImportedMemory(m *store.Memory) error {
	if !id.Valid(id.Memory, m.ID) {
		// Lists page by memory id, and their cursors hold only real ids.
		return fmt.Errorf("memory %q: not a memory id (mem_ and 26 base32 digits)", m.ID)
	}
	if _, err := memory.Check(m.Text, m.Tags); err != nil {
		return fmt.Errorf("memory %s: %w", m.ID, engineError(err))
	}
	if !store.ValidMemorySource(m.Source) {
		return fmt.Errorf("memory %s: unknown source %q", m.ID, m.Source)
	}
	if m.TaskID != "" && !id.Valid(id.Task, m.TaskID) {
		return fmt.Errorf("memory %s: task_id %q is not a task id", m.ID, m.TaskID)
	}
	if m.EstimatedTokens < 1 || !store.TimeInRange(m.CreatedAt.UTC()) {
		return fmt.Errorf("memory %s: estimated_tokens must be positive and created_at within the years 0001–9999", m.ID)
	}
	return nil
}

// checkImportedSchedule refuses a schedule row the engine could not run.
func checkImportedSchedule(sc *store.Schedule) error {
	if !id.Valid(id.Schedule, sc.ID) || sc.Name == "" {
		return fmt.Errorf("schedule %q: a schedule id (sch_…) and a name are required", sc.ID)
	}
	spec := sc.Spec
	if sc.Kind == store.ScheduleEvent {
		spec = ""
		var es scheduler.EventSpec
		if err := json.Unmarshal([]byte(sc.Spec), &es); err != nil || es.Type == "" {
			return fmt.Errorf("schedule %s: spec is not an event matcher", sc.ID)
		}
	}
	if _, err := schedule.Parse(sc.Kind, spec, sc.Timezone, sc.ActiveHours); err != nil {
		return fmt.Errorf("schedule %s: %w", sc.ID, err)
	}
	if _, err := schedule.ParseCatchUp(sc.CatchUp); err != nil {
		return fmt.Errorf("schedule %s: %w", sc.ID, err)
	}
	if len(sc.Task) == 0 || !json.Valid(sc.Task) || bytes.TrimSpace(sc.Task)[0] != '{' {
		return fmt.Errorf("schedule %s: task must be a JSON object", sc.ID)
	}
	for _, t := range []time.Time{sc.NextRunAt, sc.LastRunAt, sc.CreatedAt, sc.UpdatedAt} {
		if !t.IsZero() && !store.TimeInRange(t.UTC()) {
			return fmt.Errorf("schedule %s: %s is outside the years 0001–9999", sc.ID, t.UTC().Format(time.RFC3339))
		}
	}
	if sc.FireCount < 0 || sc.EventCursor < 0 || sc.StuckAfter < 0 {
		return fmt.Errorf("schedule %s: counts must not be negative", sc.ID)
	}
	return nil
}

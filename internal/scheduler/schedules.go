package scheduler

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/schedule"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// ErrDeclared is returned for deleting, through the API, a schedule that
// errand.yaml declares.
var ErrDeclared = errors.New("errand: the schedule is declared in errand.yaml")

// Params is a whole schedule: to create one, or as errand.yaml
// declares it.
type Params struct {
	Name string
	Kind string // cron, interval, event or heartbeat
	// Spec is the cron expression or the Go duration, or for kind event
	// the JSON of {"type": "…", "match": {…}}.
	Spec     string
	Timezone string
	CatchUp  string // one (default) or none
	// Overlap is what a firing does while the last task has not ended:
	// skip (default), buffer_one, allow_all or cancel_previous.
	Overlap     string
	ActiveHours string // heartbeat only: HH:MM-HH:MM in Timezone
	Enabled     *bool  // default true
	// Task is the template of the tasks the schedule makes: a POST
	// /api/tasks body; a heartbeat's may name a prompt_file instead of a
	// goal.
	Task       json.RawMessage
	StuckAfter time.Duration // heartbeat only; default 30m
	// EscalateTo is, for a heartbeat, the agent its scout's escalations
	// go to ("": the scout cannot escalate). MaxEscalationsPerDay caps
	// them per UTC day (nil: DefaultMaxEscalationsPerDay; 0 forbids), and
	// EscalationBudget is each escalated task's budget (nil: the default
	// task budget). Heartbeat only.
	EscalateTo           string
	MaxEscalationsPerDay *int
	EscalationBudget     *store.Budget
}

// Patch changes some fields of a schedule; nil fields stay.
type Patch struct {
	Enabled     *bool
	Spec        *string
	Timezone    *string
	CatchUp     *string
	Overlap     *string
	ActiveHours *string
	Task        json.RawMessage
	StuckAfter  *time.Duration
	// EscalateTo, MaxEscalationsPerDay and EscalationBudget change the
	// heartbeat's escalation; an empty EscalateTo removes it (with its cap
	// and budget).
	EscalateTo           *string
	MaxEscalationsPerDay *int
	EscalationBudget     *store.Budget
}

// checkWord accepts what a URL and a shell carry as they are: 1–100
// letters, digits, '.', '_' and '-'. what names it in the error ("an event
// type such as task.failed").
func checkWord(field, what, s string) error {
	if s == "" {
		return validation.Invalid(field, "is required: %s", what)
	}
	if len(s) > 100 {
		return validation.Invalid(field, "is %d bytes; the limit is 100", len(s))
	}
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return validation.Invalid(field, "%q holds %q at byte %d: use letters, digits, '.', '_' and '-'", s, r, i)
		}
	}
	return nil
}

// CheckEventType accepts a dotted event type.
func CheckEventType(field, typ string) error {
	return checkWord(field, "an event type such as task.failed or deploy.finished", typ)
}

// checkScheduleName accepts a name that cannot be taken for an id.
func checkScheduleName(name string) error {
	if strings.HasPrefix(name, string(id.Schedule)) {
		return validation.Invalid("name", "must not look like a schedule id (%s…)", id.Schedule)
	}
	return checkWord("name", "a schedule name", name)
}

// fieldError turns the schedule package's field errors into ours.
func fieldError(err error) error {
	var fe *schedule.FieldError
	if errors.As(err, &fe) {
		return validation.Invalid(fe.Field, "%s", fe.Message)
	}
	return err
}

// check validates a whole schedule and returns the row to store,
// with its next run computed from now.
func (s *Scheduler) check(ctx context.Context, p *Params) (*store.Schedule, error) {
	if err := checkScheduleName(p.Name); err != nil {
		return nil, err
	}
	sc := &store.Schedule{
		Name: p.Name, Kind: p.Kind, Spec: strings.TrimSpace(p.Spec), Timezone: p.Timezone, ActiveHours: p.ActiveHours,
		Enabled: p.Enabled == nil || *p.Enabled,
	}
	timedSpec := sc.Spec
	if sc.Kind == store.ScheduleEvent {
		timedSpec = ""
	}
	spec, err := schedule.Parse(sc.Kind, timedSpec, sc.Timezone, sc.ActiveHours)
	if err != nil {
		return nil, fieldError(err)
	}
	if sc.Kind == store.ScheduleEvent {
		es, err := ParseEventSpec(sc.Spec)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(es) // compact, keys sorted: one spelling per spec
		sc.Spec = string(b)
	} else if sc.Kind == store.ScheduleHeartbeat && sc.Spec == "" {
		sc.Spec = schedule.DefaultHeartbeat.String()
	}
	catchUp, err := schedule.ParseCatchUp(p.CatchUp)
	if err != nil {
		return nil, fieldError(err)
	}
	sc.CatchUp = string(catchUp)
	if sc.Overlap, err = schedule.ParseOverlap(sc.Kind, p.Overlap); err != nil {
		return nil, fieldError(err)
	}
	switch {
	case p.StuckAfter < 0:
		return nil, validation.Invalid("stuck_after", "must not be negative")
	case p.StuckAfter > 0 && sc.Kind != store.ScheduleHeartbeat:
		return nil, validation.Invalid("stuck_after", "only a heartbeat schedule takes it")
	case sc.Kind == store.ScheduleHeartbeat:
		sc.StuckAfter = store.Duration(cmp.Or(p.StuckAfter, DefaultStuckAfter))
	}
	if sc.Escalation, err = s.checkEscalation(sc.Kind, p); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(p.Task)) == 0 {
		return nil, validation.Invalid("task", "is required: the POST /api/tasks body of the tasks the schedule makes")
	}
	t, err := s.eng.Template(ctx, "task", p.Task, sc.Kind == store.ScheduleHeartbeat)
	if err != nil {
		return nil, err
	}
	if sc.Task, err = json.Marshal(t); err != nil {
		return nil, err
	}
	if sc.Enabled {
		sc.NextRunAt, _ = spec.Next(s.clock.Now())
	}
	return sc, nil
}

// Create validates and stores a new schedule. A bad field is a
// *ValidationError naming it, a taken name store.ErrNameTaken, and nothing
// is written. An event schedule hears only events written after it.
func (s *Scheduler) Create(ctx context.Context, p *Params) (*store.Schedule, error) {
	return s.create(ctx, p, false)
}

func (s *Scheduler) create(ctx context.Context, p *Params, declared bool) (*store.Schedule, error) {
	sc, err := s.check(ctx, p)
	if err != nil {
		return nil, err
	}
	sc.ID, sc.Declared = id.New(id.Schedule), declared
	if sc.Kind == store.ScheduleEvent {
		if sc.EventCursor, err = s.store.EventLastID(ctx); err != nil {
			return nil, err
		}
	}
	out, err := s.store.ScheduleInsert(ctx, &store.ScheduleInsertParams{Schedule: sc, Now: s.eng.Stamp()})
	if err != nil {
		return nil, err
	}
	s.eng.ScheduleChanged()
	return out, nil
}

// Get returns a schedule by id or by name.
func (s *Scheduler) Get(ctx context.Context, idOrName string) (*store.Schedule, error) {
	if id.Valid(id.Schedule, idOrName) {
		return s.store.ScheduleGetByID(ctx, idOrName)
	}
	return s.store.ScheduleGetByName(ctx, idOrName)
}

// List lists every schedule by name.
func (s *Scheduler) List(ctx context.Context) ([]*store.Schedule, error) {
	return s.store.ScheduleList(ctx, &store.ScheduleListParams{})
}

// Page lists up to limit schedules (1 to s.cfg.MaxListLimit) named after
// after, by name; next is the cursor of the page after it, "" on the last.
func (s *Scheduler) Page(ctx context.Context, after string, limit int) (page []*store.Schedule, next string, err error) {
	if limit < 1 || limit > s.cfg.MaxListLimit {
		return nil, "", validation.Invalid("limit", "must be 1 to %d", s.cfg.MaxListLimit)
	}
	page, err = s.store.ScheduleList(ctx, &store.ScheduleListParams{AfterName: after, Limit: limit + 1})
	if err != nil {
		return nil, "", err
	}
	if len(page) > limit {
		page = page[:limit]
		next = page[limit-1].Name
	}
	return page, next, nil
}

// Update changes some fields of a schedule. A changed spec, zone
// or enabling computes the next run afresh from now.
func (s *Scheduler) Update(ctx context.Context, idOrName string, patch *Patch) (*store.Schedule, error) {
	cur, err := s.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	p := &Params{
		Name: cur.Name, Kind: cur.Kind, Spec: cur.Spec, Timezone: cur.Timezone, CatchUp: cur.CatchUp, Overlap: cur.Overlap,
		ActiveHours: cur.ActiveHours, Enabled: &cur.Enabled, Task: cur.Task, StuckAfter: time.Duration(cur.StuckAfter),
	}
	if esc := cur.Escalation; esc != nil {
		p.EscalateTo, p.MaxEscalationsPerDay, p.EscalationBudget = esc.To, &esc.MaxPerDay, esc.Budget
	}
	timing := false
	if patch.Enabled != nil {
		timing = timing || *patch.Enabled != cur.Enabled
		p.Enabled = patch.Enabled
	}
	if patch.Spec != nil {
		timing = timing || *patch.Spec != cur.Spec
		p.Spec = *patch.Spec
	}
	if patch.Timezone != nil {
		timing = timing || *patch.Timezone != cur.Timezone
		p.Timezone = *patch.Timezone
	}
	if patch.ActiveHours != nil {
		timing = timing || *patch.ActiveHours != cur.ActiveHours
		p.ActiveHours = *patch.ActiveHours
	}
	if patch.CatchUp != nil {
		p.CatchUp = *patch.CatchUp
	}
	if patch.Overlap != nil {
		p.Overlap = *patch.Overlap
	}
	if patch.Task != nil {
		p.Task = patch.Task
	}
	if patch.StuckAfter != nil {
		p.StuckAfter = *patch.StuckAfter
	}
	if patch.EscalateTo != nil {
		p.EscalateTo = *patch.EscalateTo
		if p.EscalateTo == "" {
			p.MaxEscalationsPerDay, p.EscalationBudget = nil, nil
		}
	}
	if patch.MaxEscalationsPerDay != nil {
		p.MaxEscalationsPerDay = patch.MaxEscalationsPerDay
	}
	if patch.EscalationBudget != nil {
		p.EscalationBudget = patch.EscalationBudget
	}
	return s.replace(ctx, cur, p, timing, cur.Declared)
}

// replace stores p over cur. The next run stays unless timing
// changed, so an edit of the template alone does not move a firing.
func (s *Scheduler) replace(ctx context.Context, cur *store.Schedule, p *Params, timing, declared bool) (*store.Schedule, error) {
	sc, err := s.check(ctx, p)
	if err != nil {
		return nil, err
	}
	sc.ID, sc.Declared = cur.ID, declared
	if !timing && sc.Enabled == cur.Enabled {
		sc.NextRunAt = cur.NextRunAt
	}
	params := &store.ScheduleUpdateParams{Schedule: sc, Now: s.eng.Stamp()}
	if sc.Kind == store.ScheduleEvent && (cur.Kind != store.ScheduleEvent || !cur.Enabled && sc.Enabled) {
		// Listening starts (again) now: events written while it was off
		// or another kind do not fire it.
		if sc.EventCursor, err = s.store.EventLastID(ctx); err != nil {
			return nil, err
		}
		params.ResetCursor = true
	}
	out, err := s.store.ScheduleUpdate(ctx, params)
	if err != nil {
		return nil, err
	}
	s.eng.ScheduleChanged()
	return out, nil
}

// Delete removes a schedule; the tasks it made stay. A schedule
// declared in errand.yaml is ErrDeclared: remove it from the file.
func (s *Scheduler) Delete(ctx context.Context, idOrName string) error {
	cur, err := s.Get(ctx, idOrName)
	if err != nil {
		return err
	}
	if cur.Declared {
		return fmt.Errorf("%w: remove %q from its schedules: and reload (SIGHUP)", ErrDeclared, cur.Name)
	}
	return s.store.ScheduleDelete(ctx, cur.ID)
}

// ApplyDeclared makes the declared schedules those of errand.yaml: new
// names are created, existing ones replaced (their history kept; their
// next run moves only if their timing changed), and declared ones the
// file no longer names are deleted. A schedule created through the API
// with a name the file now declares becomes declared. Every entry is
// checked before anything is written.
func (s *Scheduler) ApplyDeclared(ctx context.Context, declared []*Params) error {
	checked := make(map[string]*store.Schedule, len(declared))
	for _, p := range declared {
		sc, err := s.check(ctx, p)
		if err != nil {
			return fmt.Errorf("schedule %s: %w", p.Name, err)
		}
		checked[p.Name] = sc
	}
	existing, err := s.List(ctx)
	if err != nil {
		return err
	}
	byName := map[string]*store.Schedule{}
	for _, sc := range existing {
		byName[sc.Name] = sc
	}
	keep := map[string]bool{}
	for _, p := range declared {
		keep[p.Name] = true
		cur := byName[p.Name]
		if cur == nil {
			if _, err := s.create(ctx, p, true); err != nil {
				return fmt.Errorf("schedule %s: %w", p.Name, err)
			}
			continue
		}
		sc := checked[p.Name]
		timing := cur.Kind != sc.Kind || cur.Spec != sc.Spec || cur.Timezone != sc.Timezone || cur.ActiveHours != sc.ActiveHours ||
			cur.Enabled != sc.Enabled
		if _, err := s.replace(ctx, cur, p, timing, true); err != nil {
			return fmt.Errorf("schedule %s: %w", p.Name, err)
		}
	}
	for _, sc := range existing {
		if sc.Declared && !keep[sc.Name] {
			if err := s.store.ScheduleDelete(ctx, sc.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

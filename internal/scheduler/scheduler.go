package scheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/store"
)

// Defaults of Config.
const (
	DefaultPollInterval  = time.Second
	DefaultEventPageSize = 256
	DefaultMaxListLimit  = 1000
)

// Engine is what the scheduler needs of the engine it serves: tasks made
// from templates as the engine submits them, the spend guard's hold, and
// the engine's wake-ups.
type Engine interface {
	// Template checks raw as a template whose tasks will be submitted
	// (errors are *validation.Error naming field and the field inside it)
	// and returns it, its prompt_file, allowed only when promptFileOK,
	// made absolute.
	Template(ctx context.Context, field string, raw json.RawMessage, promptFileOK bool) (*tasktemplate.Template, error)
	// FiringTask is what to insert for one firing: t, as Template returned
	// it, changed by f, validated as Submit would.
	FiringTask(ctx context.Context, t *tasktemplate.Template, f *Firing) (*store.TaskInsertParams, error)
	// CheckAgent refuses an agent nobody runs (a *validation.Error, or
	// another error saying why).
	CheckAgent(name string) error
	// SchedulesHeld reports whether the spend guard holds every schedule
	// now, and until when.
	SchedulesHeld(ctx context.Context) (until time.Time, held bool)
	// Stamp is the time to stamp writes with: nil for the store's own.
	Stamp() *time.Time
	// Wakeups returns channels closed by the next schedule change (or
	// external event) and by the engine's next write.
	Wakeups() (changed, written <-chan struct{})
	// ScheduleChanged wakes every scheduler of the process.
	ScheduleChanged()
	// Wrote tells the engine a write appended events; MadeReady that one
	// may have made a task claimable.
	Wrote()
	MadeReady()
}

// Firing is how one firing changes its schedule's template.
type Firing struct {
	Actor  string
	Source string
	// Scout makes the task a heartbeat scout, whose result goes nowhere
	// (the silent route), whatever the template's route.
	Scout bool
	// Goal and Title, when set, replace the template's.
	Goal, Title string
	// Input adds keys to the template's input.
	Input map[string]any
}

// Config tunes a Scheduler. Zero values take the defaults.
type Config struct {
	// PollInterval is the longest wait between looks at the schedules;
	// default 1s.
	PollInterval time.Duration
	// EventPageSize is how many journal events one look reads; default 256.
	EventPageSize int
	// MaxListLimit bounds a page of schedules; default 1000.
	MaxListLimit int
	// OnScheduleFired is told of each firing (for metrics): the schedule's
	// kind and how late it fired.
	OnScheduleFired func(kind string, lag time.Duration)
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to slog's default.
	Logger *slog.Logger
}

// Scheduler fires and keeps the schedules of one store.
type Scheduler struct {
	store  store.Store
	eng    Engine
	cfg    Config
	clock  clock.Clock
	logger *slog.Logger
}

// New returns a Scheduler over st for eng.
func New(st store.Store, eng Engine, cfg *Config) *Scheduler {
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.EventPageSize = cmp.Or(c.EventPageSize, DefaultEventPageSize)
	c.MaxListLimit = cmp.Or(c.MaxListLimit, DefaultMaxListLimit)
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Scheduler{store: st, eng: eng, cfg: c, clock: c.Clock, logger: c.Logger}
}

// Run fires this process's share of due schedules until ctx ends. Every
// engine on a database runs one; the store's claim makes each firing
// happen once.
func (s *Scheduler) Run(ctx context.Context) {
	polled := true
	for {
		changed, written := s.eng.Wakeups()
		wait, listening := s.RunDue(ctx, polled)
		if !listening {
			written = nil // no event schedule: writes cannot fire anything
		}
		timer := s.clock.NewTimer(wait)
		polled = false
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
			polled = true
		case <-changed:
		case <-written:
		}
		timer.Stop()
	}
}

// RunDue fires what is due now. It returns how long to wait before the
// next look and whether any event schedule listens to the journal. polled
// says the wait ran out, the moment to move idle event cursors.
func (s *Scheduler) RunDue(ctx context.Context, polled bool) (time.Duration, bool) {
	wait := s.cfg.PollInterval
	if until, held := s.eng.SchedulesHeld(ctx); held {
		// Nothing fires while the spend guard pauses all work; events
		// heard meanwhile fire after it, timed schedules catch up.
		if d := until.Sub(s.clock.Now()); d > 0 {
			wait = min(wait, d)
		}
		return wait, false
	}
	all, err := s.store.ScheduleList(ctx, &store.ScheduleListParams{EnabledOnly: true})
	if err != nil {
		if ctx.Err() == nil {
			s.logger.ErrorContext(ctx, "list schedules", slog.String("error", err.Error()))
		}
		return wait, false
	}
	var listeners []*store.Schedule
	for _, sc := range all {
		if sc.Kind == store.ScheduleEvent {
			listeners = append(listeners, sc)
			continue
		}
		if sc.NextRunAt.IsZero() {
			continue
		}
		now := s.clock.Now()
		if !now.Before(sc.NextRunAt) {
			sc = s.fireTimed(ctx, sc, now)
		}
		if sc != nil && !sc.NextRunAt.IsZero() {
			wait = min(wait, max(sc.NextRunAt.Sub(s.clock.Now()), 0))
		}
	}
	if len(listeners) > 0 {
		s.fireEvents(ctx, listeners, polled)
	}
	return wait, len(listeners) > 0
}

// FiredData is the payload of a schedule.fired event.
type FiredData struct {
	ScheduleID   string    `json:"schedule_id"`
	Name         string    `json:"name"`
	Kind         string    `json:"kind"`
	ScheduledFor time.Time `json:"scheduled_for,omitzero"`
	EventID      int64     `json:"event_id,omitempty"`
	Manual       bool      `json:"manual,omitempty"`
}

// SkippedData is the payload of a schedule.skipped event.
type SkippedData struct {
	ScheduleID string    `json:"schedule_id"`
	Name       string    `json:"name"`
	Skipped    int       `json:"skipped"`
	CatchUp    string    `json:"catch_up,omitempty"`
	From       time.Time `json:"from,omitzero"`
	Reason     string    `json:"reason,omitempty"`
}

// fire writes one claim and reports what came of it.
func (s *Scheduler) fire(ctx context.Context, sc *store.Schedule, params *store.ScheduleFireParams, lag time.Duration) *store.Schedule {
	res, err := s.store.ScheduleFire(ctx, params)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.ErrorContext(ctx, "fire schedule", slog.String("schedule", sc.Name), slog.String("error", err.Error()))
		}
		return nil
	}
	if !res.Claimed {
		return res.Schedule
	}
	if res.Task != nil {
		if f := s.cfg.OnScheduleFired; f != nil {
			f(sc.Kind, lag)
		}
		s.eng.MadeReady()
	} else if params.Skipped > 0 || res.OverlapSkipped {
		s.eng.Wrote()
	}
	return res.Schedule
}

// RunNow fires a schedule now, whatever its next run, which stays.
func (s *Scheduler) RunNow(ctx context.Context, idOrName string) (*store.Task, error) {
	sc, err := s.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	task, err := s.firingTask(ctx, sc, s.clock.Now(), nil)
	if err != nil {
		return nil, err
	}
	res, err := s.store.ScheduleFire(ctx, &store.ScheduleFireParams{
		ID: sc.ID, Manual: true, Task: task, Actor: store.ActorUser, Now: s.eng.Stamp(),
		Fired: &FiredData{ScheduleID: sc.ID, Name: sc.Name, Kind: sc.Kind, Manual: true},
	})
	if err != nil {
		return nil, err
	}
	s.eng.MadeReady()
	return res.Task, nil
}

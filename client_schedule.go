package errand

import (
	"context"
	"encoding/json"
	"time"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/schedule"
	"github.com/errandhq/errand/store"
)

type (
	// Schedule is work that starts by itself: at times (cron, interval,
	// heartbeat) or on journal events (event).
	Schedule = store.Schedule
	// ScheduleParams is a whole schedule, to create or to declare.
	ScheduleParams = engine.ScheduleParams
	// SchedulePatch changes some fields of a schedule.
	SchedulePatch = engine.SchedulePatch
)

var (
	// ErrNameTaken is returned for a schedule name another schedule has.
	ErrNameTaken = store.ErrNameTaken
	// ErrDeclared is returned for deleting a schedule errand.yaml declares.
	ErrDeclared = engine.ErrDeclared
)

// CreateSchedule validates and stores a schedule; its first firing is the
// first slot after now. A bad field is a *ValidationError naming it, a
// template naming an unknown agent one too, and nothing is written.
func (c *Client) CreateSchedule(ctx context.Context, p *ScheduleParams) (*Schedule, error) {
	return c.engine.CreateSchedule(ctx, p)
}

// Schedule returns a schedule by id or name; an unknown one matches
// ErrNotFound.
func (c *Client) Schedule(ctx context.Context, idOrName string) (*Schedule, error) {
	return c.engine.Schedule(ctx, idOrName)
}

// Schedules lists every schedule by name.
func (c *Client) Schedules(ctx context.Context) ([]*Schedule, error) {
	return c.engine.Schedules(ctx)
}

// SchedulePage lists up to limit schedules (1 to 1,000) named after
// after, by name; next is the cursor (after) of the following page, ""
// on the last.
func (c *Client) SchedulePage(ctx context.Context, after string, limit int) (page []*Schedule, next string, err error) {
	return c.engine.SchedulePage(ctx, after, limit)
}

// UpdateSchedule changes some fields of a schedule.
func (c *Client) UpdateSchedule(ctx context.Context, idOrName string, patch *SchedulePatch) (*Schedule, error) {
	return c.engine.UpdateSchedule(ctx, idOrName, patch)
}

// DeleteSchedule removes a schedule; the tasks it made stay.
func (c *Client) DeleteSchedule(ctx context.Context, idOrName string) error {
	return c.engine.DeleteSchedule(ctx, idOrName)
}

// RunSchedule fires a schedule now and returns the task it made; its next
// run does not move.
func (c *Client) RunSchedule(ctx context.Context, idOrName string) (*Task, error) {
	return c.engine.RunSchedule(ctx, idOrName)
}

// ApplySchedules makes the declared schedules exactly these (see the
// schedules: section of errand.yaml).
func (c *Client) ApplySchedules(ctx context.Context, declared []*ScheduleParams) error {
	return c.engine.ApplyDeclared(ctx, declared)
}

// PostEvent journals an external event, with actor external, for event
// schedules to hear. Its type must not start with task.
func (c *Client) PostEvent(ctx context.Context, typ string, data json.RawMessage) (*Event, error) {
	return c.engine.PostEvent(ctx, typ, data)
}

// NextRuns returns up to n coming firings of a schedule from its next
// run; none for an event schedule or a disabled one.
func NextRuns(sc *Schedule, n int) []time.Time {
	if sc == nil || sc.NextRunAt.IsZero() || n < 1 {
		return nil
	}
	spec, err := schedule.Parse(sc.Kind, sc.Spec, sc.Timezone, sc.ActiveHours)
	if err != nil {
		return nil
	}
	return append([]time.Time{sc.NextRunAt}, spec.NextN(sc.NextRunAt, n-1)...)
}

package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// DecodeScheduleColumns fills what a schedule's row stores encoded: its
// task's JSON, stuck_after in microseconds and its escalation's JSON (""
// for none).
func DecodeScheduleColumns(sc *Schedule, task string, stuckAfterMicros int64, escalation string) error {
	e, err := DecodeEscalation(escalation)
	if err != nil {
		return err
	}
	sc.Escalation = e
	sc.Task = json.RawMessage(task)
	sc.StuckAfter = Duration(time.Duration(stuckAfterMicros) * time.Microsecond)
	return nil
}

// NameTakenError is the error of a schedule write whose name another
// schedule has.
func NameTakenError(name string) error {
	return fmt.Errorf("%w: %q", ErrNameTaken, name)
}

// ScheduleMovedOn reports whether a firing finds the schedule moved on
// from what its caller read (another engine fired it, or it changed), so
// that it claims nothing. A run now is never moved on.
func ScheduleMovedOn(cur *Schedule, p *ScheduleFireParams) bool {
	return !p.Manual && (!cur.NextRunAt.Equal(p.NextRunAt) || cur.EventCursor != p.EventCursor)
}

// ScheduleFirer is a driver's write transaction as FireScheduleTask uses
// it, once the firing has claimed the schedule.
type ScheduleFirer interface {
	TaskReader
	// ScheduleCancelTree cancels a task and its subtree.
	ScheduleCancelTree(ctx context.Context, id, reason, actor string, at time.Time) error
	// ScheduleInsertTask writes the firing's task.
	ScheduleInsertTask(ctx context.Context, p *TaskInsertParams) (*TaskInsertResult, error)
	// ScheduleRetryable reports an error on which the driver runs the
	// whole firing again; it is returned as it is.
	ScheduleRetryable(err error) bool
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
}

// FireScheduleTask does what a claimed firing writes besides the
// schedule's row (see Store.ScheduleFire): it follows the overlap policy
// (not for a run now), makes the task with its schedule.fired event, and
// records skipped firings. current returns the schedule as claimed. It
// returns the id of the task made, "" for none, and fills out's Task and
// OverlapSkipped.
func FireScheduleTask(ctx context.Context, x ScheduleFirer, p *ScheduleFireParams, current func() (*Schedule, error),
	out *ScheduleFireResult, at time.Time,
) (string, error) {
	task := p.Task
	if task != nil && !p.Manual {
		cur, err := current()
		if err != nil {
			return "", err
		}
		task, err = FireOverlap(cur, task, OverlapOps{
			GetTask: func(id string) (*Task, error) { return x.TaskByID(ctx, id) },
			Skip: func(data *OverlapSkippedData) error {
				out.OverlapSkipped = true
				return x.AppendEvent(ctx, "", EventScheduleSkipped, p.Actor, data, at)
			},
			Cancel: func(id, reason string) error { return x.ScheduleCancelTree(ctx, id, reason, p.Actor, at) },
		})
		if err != nil {
			return "", err
		}
	}
	taskID := ""
	if task != nil {
		res, err := x.ScheduleInsertTask(ctx, task)
		if x.ScheduleRetryable(err) {
			return "", err
		}
		if err != nil {
			// Not %w: a task that cannot be made is not an unknown
			// schedule.
			return "", fmt.Errorf("schedule task %s: %v", task.ID, err)
		}
		out.Task = res.Task
		taskID = res.Task.ID
		if err := x.AppendEvent(ctx, res.Task.ID, EventScheduleFired, p.Actor, p.Fired, at); err != nil {
			return "", err
		}
	}
	if p.Skipped > 0 {
		if err := x.AppendEvent(ctx, "", EventScheduleSkipped, p.Actor, p.SkippedData, at); err != nil {
			return "", err
		}
	}
	return taskID, nil
}

// EscalationCounter is a driver's write transaction as Escalate uses it.
type EscalationCounter interface {
	// EscalationCount reads, locked where the driver locks, a schedule's
	// count of escalations and the day it is of; found is false for a
	// schedule that is gone.
	EscalationCount(ctx context.Context, scheduleID string) (day string, count int, found bool, err error)
	// EscalationCountSet writes a schedule's count.
	EscalationCountSet(ctx context.Context, scheduleID, day string, count int) error
}

// Escalate makes a completing scout's escalations (EscalationParams) in
// its finish's transaction. It returns the finish's result, the tasks to
// insert and the events to append.
func Escalate(ctx context.Context, x EscalationCounter, p *EscalationParams) (json.RawMessage, []*TaskInsertParams, []EventAppend, error) {
	day, count, found, err := x.EscalationCount(ctx, p.ScheduleID)
	if err != nil {
		return nil, nil, nil, err
	}
	made, count := PlanEscalation(p, found, day, count)
	if found && made > 0 {
		if err := x.EscalationCountSet(ctx, p.ScheduleID, p.Day, count); err != nil {
			return nil, nil, nil, err
		}
	}
	result, events := p.Record(made)
	return result, p.Tasks[:made], events, nil
}

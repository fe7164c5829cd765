package store

import (
	"context"
	"time"
)

// EventAppender journals an event in a driver's write transaction.
type EventAppender interface {
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
}

// AppendStarted journals the start of each claimed task, in the order
// given: from the status it was claimed at (from, by task id) to running,
// under owner.
func AppendStarted(ctx context.Context, x EventAppender, claimed []*Task, from map[string]Status, owner string, at time.Time) error {
	for _, t := range claimed {
		err := x.AppendEvent(ctx, t.ID, EventTaskStarted, ActorSystem, &TransitionData{
			From: from[t.ID], To: StatusRunning, Attempt: t.Attempt, Owner: owner,
		}, at)
		if err != nil {
			return err
		}
	}
	return nil
}

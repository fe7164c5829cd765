package store

import "context"

// ChangeTask runs change, a decision on the task id, and then reads that
// task as the transaction sees it: what a write that answers with the
// task it changed returns.
func ChangeTask(ctx context.Context, x TaskReader, id string, change func() error) (*Task, error) {
	if err := change(); err != nil {
		return nil, err
	}
	return x.TaskByID(ctx, id)
}

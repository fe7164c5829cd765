package store

import "context"

// TaskReader reads a task in a driver's write transaction.
type TaskReader interface {
	// TaskByID reads the task as the transaction sees it, or ErrNotFound.
	TaskByID(ctx context.Context, id string) (*Task, error)
}

package pgstore

// Stubs of what is still to port from sqlitestore (dependency.go,
// pause.go, purge.go). Whoever ports one deletes its stub here.

import (
	"context"
	"time"

	"github.com/errandhq/errand/store"
)

func (s *Store) settle(ctx context.Context, tx *txn, taskID string, at time.Time) error {
	return errNotPorted
}

func (s *Store) ended(ctx context.Context, tx *txn, taskID string, at time.Time) error {
	return errNotPorted
}

func (s *Store) resumeIfChildrenDone(ctx context.Context, tx *txn, parentID string, at time.Time) error {
	return errNotPorted
}

func (s *Store) openChildren(ctx context.Context, tx *txn, parentID string) (int, error) {
	return 0, errNotPorted
}

func (s *Store) TaskDependencyAdd(ctx context.Context, p *store.TaskDependencyAddParams) (*store.Task, error) {
	return nil, errNotPorted
}

func (s *Store) DependencyList(ctx context.Context, taskIDs []string) ([]*store.Dependency, error) {
	return nil, errNotPorted
}

func (s *Store) TaskPause(ctx context.Context, p *store.TaskPauseParams) (*store.Task, error) {
	return nil, errNotPorted
}

func (s *Store) TaskResume(ctx context.Context, p *store.TaskPauseParams) (*store.Task, error) {
	return nil, errNotPorted
}

func (s *Store) TaskPurge(ctx context.Context, p *store.TaskPurgeParams) (*store.TaskPurgeResult, error) {
	return nil, errNotPorted
}

package pgstore

// Stubs of the methods still to port from sqlitestore (lease.go, finish.go,
// input.go). Whoever ports one deletes its stub here.

import (
	"context"
	"errors"
	"time"

	"github.com/errandhq/errand/store"
)

var errNotPorted = errors.New("pgstore: not ported yet")

func (s *Store) TaskLeaseMany(ctx context.Context, p *store.TaskLeaseManyParams) ([]*store.Task, error) {
	return nil, errNotPorted
}

func (s *Store) LeaseRenewMany(ctx context.Context, p *store.LeaseRenewManyParams) ([]store.LeaseRenewResult, error) {
	return nil, errNotPorted
}

func (s *Store) TaskRecover(ctx context.Context, p *store.TaskRecoverParams) ([]*store.Task, error) {
	return nil, errNotPorted
}

func (s *Store) LeaseOwnerList(ctx context.Context) ([]string, error) { return nil, errNotPorted }

func (s *Store) TaskFinishMany(ctx context.Context, p []*store.TaskFinishParams) ([]error, error) {
	return nil, errNotPorted
}

func (s *Store) TaskCheckpoint(ctx context.Context, p *store.TaskCheckpointParams) error {
	return errNotPorted
}

func (s *Store) TaskProgress(ctx context.Context, p *store.TaskProgressParams) error {
	return errNotPorted
}

func (s *Store) TaskCancel(ctx context.Context, p *store.TaskCancelParams) (*store.Task, error) {
	return nil, errNotPorted
}

func (s *Store) TaskRetry(ctx context.Context, p *store.TaskRetryParams) (*store.Task, error) {
	return nil, errNotPorted
}

func (s *Store) InputAnswer(ctx context.Context, p *store.InputAnswerParams) (*store.InputRequest, error) {
	return nil, errNotPorted
}

func (s *Store) InputExpire(ctx context.Context, now *time.Time) (int, error) { return 0, errNotPorted }

func (s *Store) InputList(ctx context.Context, p *store.InputListParams) ([]*store.InputRequest, error) {
	return nil, errNotPorted
}

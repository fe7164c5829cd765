package pgstore

// Stubs of what is still to port from sqlitestore (memory.go, schedule.go,
// transfer.go, health.go). Whoever ports one deletes its stub here.

import (
	"context"
	"time"

	"github.com/errandhq/errand/store"
)

func (s *Store) insertMemory(ctx context.Context, tx *txn, p *store.MemoryInsertParams, at time.Time) (*store.Memory, bool, error) {
	return nil, false, errNotPorted
}

func (s *Store) MemoryInsert(ctx context.Context, p *store.MemoryInsertParams) (*store.MemoryInsertResult, error) {
	return nil, errNotPorted
}

func (s *Store) MemoryGetByID(ctx context.Context, id string) (*store.Memory, error) {
	return nil, errNotPorted
}

func (s *Store) MemoryList(ctx context.Context, p *store.MemoryListParams) ([]*store.Memory, error) {
	return nil, errNotPorted
}

func (s *Store) MemorySearch(ctx context.Context, p *store.MemorySearchParams) ([]*store.Memory, error) {
	return nil, errNotPorted
}

func (s *Store) MemoryDelete(ctx context.Context, p *store.MemoryDeleteParams) error {
	return errNotPorted
}

func (s *Store) MemoryPurge(ctx context.Context, p *store.MemoryPurgeParams) (int64, error) {
	return 0, errNotPorted
}

func (s *Store) ScheduleInsert(ctx context.Context, p *store.ScheduleInsertParams) (*store.Schedule, error) {
	return nil, errNotPorted
}

func (s *Store) ScheduleGetByID(ctx context.Context, id string) (*store.Schedule, error) {
	return nil, errNotPorted
}

func (s *Store) ScheduleGetByName(ctx context.Context, name string) (*store.Schedule, error) {
	return nil, errNotPorted
}

func (s *Store) ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*store.Schedule, error) {
	return nil, errNotPorted
}

func (s *Store) ScheduleUpdate(ctx context.Context, p *store.ScheduleUpdateParams) (*store.Schedule, error) {
	return nil, errNotPorted
}

func (s *Store) ScheduleDelete(ctx context.Context, id string) error { return errNotPorted }

func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) (*store.ScheduleFireResult, error) {
	return nil, errNotPorted
}

func (s *Store) EventInsert(ctx context.Context, p *store.EventInsertParams) (*store.Event, error) {
	return nil, errNotPorted
}

func (s *Store) BatchExport(ctx context.Context, p *store.BatchExportParams) (*store.Batch, error) {
	return nil, errNotPorted
}

func (s *Store) BatchImport(ctx context.Context, b *store.Batch) error { return errNotPorted }

func (s *Store) CheckWritable(ctx context.Context) error { return errNotPorted }

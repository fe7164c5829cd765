package pgstore

import (
	"context"
	"fmt"
)

// CheckWritable implements store.Store. It runs a write that matches no
// row in a transaction it rolls back: PostgreSQL refuses it as it would a
// real one on a standby (in recovery), in a read-only transaction or
// database, or without the privilege, and it changes nothing.
func (s *Store) CheckWritable(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("check writable: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // it wrote nothing
	if _, err := tx.Exec(ctx, `UPDATE tasks SET updated_at = updated_at WHERE false`); err != nil {
		return fmt.Errorf("check writable: %w", err)
	}
	return nil
}

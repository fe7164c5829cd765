package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/errandhq/errand/store"
)

// LeaderAcquire implements store.Store. The write transaction serialises
// contenders, so of two asking at once exactly one gets a free lease.
func (s *Store) LeaderAcquire(ctx context.Context, p *store.LeaderAcquireParams) (*store.Leader, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("acquire leader %s: %w", p.Name, err)
	}
	at := now(p.Now)
	l := &store.Leader{Name: p.Name}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var expires int64
		err := tx.QueryRowContext(ctx, `INSERT INTO leaders (name, owner, expires_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
			WHERE leaders.owner = excluded.owner OR leaders.expires_at <= ?4
			RETURNING owner, expires_at`,
			p.Name, p.Owner, micros(at.Add(p.TTL)), micros(at)).Scan(&l.Owner, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			// Held by another owner: report who, read in the same transaction.
			err = tx.QueryRowContext(ctx, `SELECT owner, expires_at FROM leaders WHERE name = ?`, p.Name).
				Scan(&l.Owner, &expires)
		}
		l.ExpiresAt = fromMicros(expires)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("acquire leader %s: %w", p.Name, err)
	}
	return l, nil
}

// LeaderRelease implements store.Store.
func (s *Store) LeaderRelease(ctx context.Context, p *store.LeaderReleaseParams) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM leaders WHERE name = ? AND owner = ?`, p.Name, p.Owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("release leader %s: %w", p.Name, err)
	}
	return nil
}

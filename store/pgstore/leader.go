package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

// leaderAcquire takes or renews a lease in one statement: PostgreSQL locks
// the conflicting row and checks the WHERE against its latest version, so
// of many contenders at once exactly one gets a free or expired lease.
// Without a pinned Now the database's clock decides, the same for every
// process whatever its own clock says.
const leaderAcquire = `
INSERT INTO leaders AS l (name, owner, expires_at)
VALUES ($1, $2, coalesce($4::timestamptz, statement_timestamp()) + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE l.owner = excluded.owner OR l.expires_at <= coalesce($4::timestamptz, statement_timestamp())
RETURNING owner, expires_at`

// LeaderAcquire implements store.Store.
func (s *Store) LeaderAcquire(ctx context.Context, p *store.LeaderAcquireParams) (*store.Leader, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("acquire leader %s: %w", p.Name, err)
	}
	var at *time.Time
	if p.Now != nil {
		t := s.now(p.Now)
		at = &t
	}
	l := &store.Leader{Name: p.Name}
	// A refusal returns no row; the holder is read next. Between the two
	// the holder may release, so try again: the next try takes the lease.
	for range 3 {
		var expires time.Time
		err := s.pool.QueryRow(ctx, leaderAcquire, p.Name, p.Owner, p.TTL.Microseconds(), at).Scan(&l.Owner, &expires)
		if errors.Is(err, pgx.ErrNoRows) {
			err = s.pool.QueryRow(ctx, `SELECT owner, expires_at FROM leaders WHERE name = $1`, p.Name).Scan(&l.Owner, &expires)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("acquire leader %s: %w", p.Name, err)
		}
		l.ExpiresAt = fromDB(expires)
		return l, nil
	}
	return nil, fmt.Errorf("acquire leader %s: released and taken again while asked for", p.Name)
}

// LeaderRelease implements store.Store.
func (s *Store) LeaderRelease(ctx context.Context, p *store.LeaderReleaseParams) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM leaders WHERE name = $1 AND owner = $2`, p.Name, p.Owner); err != nil {
		return fmt.Errorf("release leader %s: %w", p.Name, err)
	}
	return nil
}

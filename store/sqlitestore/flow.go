package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

var _ store.FlowStore = (*Store)(nil)

// AgentPauseSet implements store.FlowStore.
func (s *Store) AgentPauseSet(ctx context.Context, p *store.AgentPauseSetParams) (bool, error) {
	if p.Agent == "" {
		return false, errors.New("pause agent: agent is required")
	}
	at := now(p.Now)
	var changed bool
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var (
			res sql.Result
			err error
		)
		if p.Paused {
			res, err = tx.ExecContext(ctx, `INSERT INTO agent_pauses (agent, actor, paused_at) VALUES (?, ?, ?)
				ON CONFLICT (agent) DO NOTHING`, p.Agent, p.Actor, micros(at))
		} else {
			res, err = tx.ExecContext(ctx, `DELETE FROM agent_pauses WHERE agent = ?`, p.Agent)
		}
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pause agent %s: %w", p.Agent, err)
	}
	return changed, nil
}

// AgentPauseList implements store.FlowStore.
func (s *Store) AgentPauseList(ctx context.Context) ([]*store.AgentPause, error) {
	out, err := queryAll(ctx, s.reader, func(r rowScanner) (*store.AgentPause, error) {
		var (
			ap store.AgentPause
			at int64
		)
		if err := r.Scan(&ap.Agent, &ap.Actor, &at); err != nil {
			return nil, err
		}
		ap.PausedAt = fromMicros(at)
		return &ap, nil
	}, `SELECT agent, actor, paused_at FROM agent_pauses ORDER BY agent`)
	if err != nil {
		return nil, fmt.Errorf("list paused agents: %w", err)
	}
	return out, nil
}

// sqlFlowStats counts by agent (by 0) and by concurrency key (by 1) in one
// pass over the tasks that run or wait to.
const sqlFlowStats = `SELECT 0, agent,
		count(*) FILTER (WHERE status = 'running'), count(*) FILTER (WHERE status <> 'running'),
		count(*) FILTER (WHERE status <> 'running' AND substr(json_extract(progress, '$.label'), 1, length(?1)) = ?1)
	FROM tasks WHERE status IN ('running', 'pending', 'retry_scheduled')
	GROUP BY agent
	UNION ALL
	SELECT 1, concurrency_key,
		count(*) FILTER (WHERE status = 'running'), count(*) FILTER (WHERE status <> 'running'),
		count(*) FILTER (WHERE status <> 'running' AND substr(json_extract(progress, '$.label'), 1, length(?1)) = ?1)
	FROM tasks WHERE status IN ('running', 'pending', 'retry_scheduled') AND concurrency_key IS NOT NULL
	GROUP BY concurrency_key`

// FlowStats implements store.FlowStore.
func (s *Store) FlowStats(ctx context.Context) (*store.FlowStats, error) {
	rows, err := s.reader.QueryContext(ctx, sqlFlowStats, store.RateLimitLabel)
	if err != nil {
		return nil, fmt.Errorf("count flow: %w", err)
	}
	defer rows.Close()
	st := &store.FlowStats{Agents: map[string]store.FlowCount{}, Keys: map[string]store.FlowCount{}}
	for rows.Next() {
		var (
			byKey bool
			name  string
			c     store.FlowCount
		)
		if err := rows.Scan(&byKey, &name, &c.Running, &c.Pending, &c.RateLimited); err != nil {
			return nil, fmt.Errorf("count flow: %w", err)
		}
		if byKey {
			st.Keys[name] = c
		} else {
			st.Agents[name] = c
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count flow: %w", err)
	}
	return st, nil
}

// RateLimitTake implements store.FlowStore. The write lock makes the read
// and the write of the bucket one step for every daemon of the file.
func (s *Store) RateLimitTake(ctx context.Context, p *store.RateLimitTakeParams) (time.Duration, error) {
	if err := store.ValidateRateLimitTake(p); err != nil {
		return 0, err
	}
	if p.Limit == (store.RateLimit{}) {
		return 0, nil
	}
	at := micros(now(p.Now))
	var wait time.Duration
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		b, err := loadBucket(ctx, tx, p.Model, p.Limit, at)
		if err != nil {
			return err
		}
		if wait = b.Take(p.Limit, p.Requests, p.Tokens, p.Reserve); wait > p.Reserve {
			return nil
		}
		return saveBucket(ctx, tx, p.Model, b)
	})
	if err != nil {
		return 0, fmt.Errorf("take rate limit of %s: %w", p.Model, err)
	}
	return wait, nil
}

// RateLimitAdjust implements store.FlowStore.
func (s *Store) RateLimitAdjust(ctx context.Context, p *store.RateLimitAdjustParams) error {
	if err := store.ValidateRateLimit(p.Model, p.Limit); err != nil {
		return err
	}
	if p.Limit.TokensPerMinute == 0 || p.Tokens == 0 {
		return nil
	}
	at := micros(now(p.Now))
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		b, err := loadBucket(ctx, tx, p.Model, p.Limit, at)
		if err != nil {
			return err
		}
		b.Adjust(p.Limit, p.Tokens)
		return saveBucket(ctx, tx, p.Model, b)
	})
	if err != nil {
		return fmt.Errorf("adjust rate limit of %s: %w", p.Model, err)
	}
	return nil
}

// loadBucket reads a model's bucket refilled up to at; a model without one
// starts full.
func loadBucket(ctx context.Context, tx *sql.Tx, model string, l store.RateLimit, at int64) (*store.RateBucket, error) {
	var b store.RateBucket
	err := tx.QueryRowContext(ctx, `SELECT requests, tokens, updated_at FROM rate_buckets WHERE model = ?`, model).
		Scan(&b.Requests, &b.Tokens, &b.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return store.NewRateBucket(l, at), nil
	}
	if err != nil {
		return nil, err
	}
	b.Refill(l, at)
	return &b, nil
}

func saveBucket(ctx context.Context, tx *sql.Tx, model string, b *store.RateBucket) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO rate_buckets (model, requests, tokens, updated_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (model) DO UPDATE SET requests = ?2, tokens = ?3, updated_at = ?4`,
		model, b.Requests, b.Tokens, b.UpdatedAt)
	return err
}

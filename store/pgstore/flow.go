package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/errandhq/errand/store"
)

var _ store.FlowStore = (*Store)(nil)

// AgentPauseSet implements store.FlowStore. A change signals every daemon,
// whose claims hold a paused agent's tasks back.
func (s *Store) AgentPauseSet(ctx context.Context, p *store.AgentPauseSetParams) (bool, error) {
	if p.Agent == "" {
		return false, errors.New("pause agent: agent is required")
	}
	at := s.now(p.Now)
	var changed bool
	err := s.writeTx(ctx, func(tx *txn) error {
		var (
			tag pgconn.CommandTag
			err error
		)
		if p.Paused {
			tag, err = tx.Exec(ctx, `INSERT INTO agent_pauses (agent, actor, paused_at) VALUES ($1, $2, $3)
				ON CONFLICT (agent) DO NOTHING`, p.Agent, p.Actor, at)
		} else {
			tag, err = tx.Exec(ctx, `DELETE FROM agent_pauses WHERE agent = $1`, p.Agent)
		}
		if err != nil {
			return err
		}
		if changed = tag.RowsAffected() > 0; changed {
			tx.signal(store.Signal{Kind: store.SignalAgents})
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("pause agent %s: %w", p.Agent, err)
	}
	return changed, nil
}

// AgentPauseList implements store.FlowStore.
func (s *Store) AgentPauseList(ctx context.Context) ([]*store.AgentPause, error) {
	rows, err := s.pool.Query(ctx, `SELECT agent, actor, paused_at FROM agent_pauses ORDER BY agent`)
	if err != nil {
		return nil, fmt.Errorf("list paused agents: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.AgentPause, error) {
		var ap store.AgentPause
		if err := row.Scan(&ap.Agent, &ap.Actor, &ap.PausedAt); err != nil {
			return nil, err
		}
		ap.PausedAt = ap.PausedAt.UTC()
		return &ap, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list paused agents: %w", err)
	}
	return out, nil
}

// sqlFlowStats counts by agent (false) and by concurrency key (true) in
// one query over the tasks that run or wait to.
const sqlFlowStats = `SELECT false, agent,
		count(*) FILTER (WHERE status = 'running'), count(*) FILTER (WHERE status <> 'running'),
		count(*) FILTER (WHERE status <> 'running' AND starts_with(progress ->> 'label', $1))
	FROM tasks WHERE status IN ('running', 'pending', 'retry_scheduled')
	GROUP BY agent
	UNION ALL
	SELECT true, concurrency_key,
		count(*) FILTER (WHERE status = 'running'), count(*) FILTER (WHERE status <> 'running'),
		count(*) FILTER (WHERE status <> 'running' AND starts_with(progress ->> 'label', $1))
	FROM tasks WHERE status IN ('running', 'pending', 'retry_scheduled') AND concurrency_key IS NOT NULL
	GROUP BY concurrency_key`

// FlowStats implements store.FlowStore.
func (s *Store) FlowStats(ctx context.Context) (*store.FlowStats, error) {
	rows, err := s.pool.Query(ctx, sqlFlowStats, store.RateLimitLabel)
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

// RateLimitTake implements store.FlowStore. The bucket's row lock makes
// its read and write one step for every daemon of the store.
func (s *Store) RateLimitTake(ctx context.Context, p *store.RateLimitTakeParams) (time.Duration, error) {
	if err := store.ValidateRateLimitTake(p); err != nil {
		return 0, err
	}
	if p.Limit == (store.RateLimit{}) {
		return 0, nil
	}
	at := s.now(p.Now)
	var wait time.Duration
	err := s.writeTx(ctx, func(tx *txn) error {
		b, err := lockBucket(ctx, tx, p.Model, p.Limit, at)
		if err != nil {
			return err
		}
		if wait = b.Take(p.Limit, p.Requests, p.Tokens, p.Reserve); wait > p.Reserve {
			return nil
		}
		saveBucket(tx, p.Model, b)
		return nil
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
	at := s.now(p.Now)
	err := s.writeTx(ctx, func(tx *txn) error {
		b, err := lockBucket(ctx, tx, p.Model, p.Limit, at)
		if err != nil {
			return err
		}
		b.Adjust(p.Limit, p.Tokens)
		saveBucket(tx, p.Model, b)
		return nil
	})
	if err != nil {
		return fmt.Errorf("adjust rate limit of %s: %w", p.Model, err)
	}
	return nil
}

// lockBucket locks a model's bucket until tx ends, creating it full if
// there is none, and returns it refilled up to at.
func lockBucket(ctx context.Context, tx *txn, model string, l store.RateLimit, at time.Time) (*store.RateBucket, error) {
	full := store.NewRateBucket(l, at.UnixMicro())
	tx.queue(`INSERT INTO rate_buckets (model, requests, tokens, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (model) DO NOTHING`, model, full.Requests, full.Tokens, at)
	var (
		b       store.RateBucket
		updated time.Time
	)
	if err := tx.QueryRow(ctx, `SELECT requests, tokens, updated_at FROM rate_buckets WHERE model = $1 FOR UPDATE`, model).
		Scan(&b.Requests, &b.Tokens, &updated); err != nil {
		return nil, err
	}
	b.UpdatedAt = updated.UnixMicro()
	b.Refill(l, at.UnixMicro())
	return &b, nil
}

// saveBucket writes b with the commit.
func saveBucket(tx *txn, model string, b *store.RateBucket) {
	tx.queue(`UPDATE rate_buckets SET requests = $2, tokens = $3, updated_at = $4 WHERE model = $1`,
		model, b.Requests, b.Tokens, time.UnixMicro(b.UpdatedAt).UTC())
}

package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
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
	if err := validateTake(p); err != nil {
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
		if wait = b.take(p.Limit, p.Requests, p.Tokens); wait > 0 {
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
	if err := validateRateLimit(p.Model, p.Limit); err != nil {
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
		b.adjust(p.Limit, p.Tokens)
		return saveBucket(ctx, tx, p.Model, b)
	})
	if err != nil {
		return fmt.Errorf("adjust rate limit of %s: %w", p.Model, err)
	}
	return nil
}

// loadBucket reads a model's bucket refilled up to at; a model without one
// starts full.
func loadBucket(ctx context.Context, tx *sql.Tx, model string, l store.RateLimit, at int64) (*bucket, error) {
	var b bucket
	err := tx.QueryRowContext(ctx, `SELECT requests, tokens, updated_at FROM rate_buckets WHERE model = ?`, model).
		Scan(&b.requests, &b.tokens, &b.at)
	if errors.Is(err, sql.ErrNoRows) {
		return fullBucket(l, at), nil
	}
	if err != nil {
		return nil, err
	}
	b.refill(l, at)
	return &b, nil
}

func saveBucket(ctx context.Context, tx *sql.Tx, model string, b *bucket) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO rate_buckets (model, requests, tokens, updated_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (model) DO UPDATE SET requests = ?2, tokens = ?3, updated_at = ?4`,
		model, b.requests, b.tokens, b.at)
	return err
}

// The bucket arithmetic below is the same in every driver.

func validateRateLimit(model string, l store.RateLimit) error {
	if model == "" {
		return errors.New("rate limit: model is required")
	}
	if l.RequestsPerMinute < 0 {
		return fmt.Errorf("rate limit of %s: requests_per_minute is negative (%d)", model, l.RequestsPerMinute)
	}
	if l.TokensPerMinute < 0 {
		return fmt.Errorf("rate limit of %s: tokens_per_minute is negative (%d)", model, l.TokensPerMinute)
	}
	return nil
}

func validateTake(p *store.RateLimitTakeParams) error {
	if err := validateRateLimit(p.Model, p.Limit); err != nil {
		return err
	}
	if p.Requests < 0 {
		return fmt.Errorf("take rate limit of %s: requests is negative (%d)", p.Model, p.Requests)
	}
	if p.Tokens < 0 {
		return fmt.Errorf("take rate limit of %s: tokens is negative (%d)", p.Model, p.Tokens)
	}
	return nil
}

// bucket is a model's request and token levels as of at (microseconds).
type bucket struct {
	requests, tokens float64
	at               int64
}

func fullBucket(l store.RateLimit, at int64) *bucket {
	return &bucket{requests: fullLevel(l.RequestsPerMinute), tokens: fullLevel(l.TokensPerMinute), at: at}
}

// unlimited is the level of a bucket without a limit: full of any limit
// it may be given later, as a new bucket would be.
const unlimited = 1e300

func fullLevel(limit int) float64 {
	if limit == 0 {
		return unlimited
	}
	return float64(limit)
}

// refill adds what the limits give from b.at to at, up to a full bucket
// (of the limits as they are now). A time before b.at (another host's
// clock) adds nothing.
func (b *bucket) refill(l store.RateLimit, at int64) {
	elapsed := float64(max(0, at-b.at))
	b.requests = refillLevel(b.requests, l.RequestsPerMinute, elapsed)
	b.tokens = refillLevel(b.tokens, l.TokensPerMinute, elapsed)
	b.at = max(b.at, at)
}

const minuteMicros = float64(time.Minute / time.Microsecond)

func refillLevel(level float64, limit int, elapsedMicros float64) float64 {
	if limit == 0 {
		return unlimited
	}
	return min(float64(limit), level+float64(limit)*elapsedMicros/minuteMicros)
}

// take takes requests and tokens when both buckets hold them, else takes
// nothing and returns how long until they would.
func (b *bucket) take(l store.RateLimit, requests int, tokens int64) time.Duration {
	wait := max(shortfall(b.requests, l.RequestsPerMinute, float64(requests)),
		shortfall(b.tokens, l.TokensPerMinute, float64(tokens)))
	if wait > 0 {
		return wait
	}
	if l.RequestsPerMinute > 0 {
		b.requests -= float64(requests)
	}
	if l.TokensPerMinute > 0 {
		b.tokens -= float64(tokens)
	}
	return 0
}

// adjust gives tokens back (up to a full bucket) or takes more (into debt).
func (b *bucket) adjust(l store.RateLimit, tokens int64) {
	b.tokens += float64(tokens)
	if tokens > 0 {
		b.tokens = min(b.tokens, float64(l.TokensPerMinute))
	}
}

// levelSlack absorbs float rounding in refills, so a bucket refilled to
// exactly what is asked serves it.
const levelSlack = 1e-9

// shortfall is how long a bucket at level, refilling limit a minute, takes
// to hold ask, or a full bucket when ask is more than that; at least a
// millisecond when not 0.
func shortfall(level float64, limit int, ask float64) time.Duration {
	if limit == 0 {
		return 0
	}
	missing := min(ask, float64(limit)) - level
	if missing <= levelSlack {
		return 0
	}
	d := time.Duration(math.Ceil(missing * float64(time.Minute) / float64(limit)))
	return max(d, time.Millisecond)
}

package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

// PromptOverheadGet implements store.Store.
func (s *Store) PromptOverheadGet(ctx context.Context, key string) (*store.PromptOverhead, error) {
	o := &store.PromptOverhead{Key: key}
	var updated time.Time
	err := s.pool.QueryRow(ctx, `SELECT agent, tokens, updated_at FROM prompt_overheads WHERE key = $1`, key).
		Scan(&o.Agent, &o.Tokens, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get prompt overhead %s: %w", key, err)
	}
	o.UpdatedAt = fromDB(updated)
	return o, nil
}

// promptOverheadRecord keeps the least figure in one statement: PostgreSQL
// locks the conflicting row and checks the WHERE against its latest
// version, so records racing each other keep the smallest. The row is
// read back in a second statement, since a refused update returns none.
const promptOverheadRecord = `
INSERT INTO prompt_overheads AS o (key, agent, tokens, updated_at)
VALUES ($1, $2, $3, coalesce($4::timestamptz, statement_timestamp()))
ON CONFLICT (key) DO UPDATE SET agent = excluded.agent, tokens = excluded.tokens, updated_at = excluded.updated_at
WHERE excluded.tokens < o.tokens`

// PromptOverheadRecord implements store.Store.
func (s *Store) PromptOverheadRecord(ctx context.Context, p *store.PromptOverheadRecordParams) (*store.PromptOverhead, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("record prompt overhead %s: %w", p.Key, err)
	}
	var at *time.Time
	if p.Now != nil {
		t := s.now(p.Now)
		at = &t
	}
	if _, err := s.pool.Exec(ctx, promptOverheadRecord, p.Key, p.Agent, p.Tokens, at); err != nil {
		return nil, fmt.Errorf("record prompt overhead %s: %w", p.Key, err)
	}
	o, err := s.PromptOverheadGet(ctx, p.Key)
	if err != nil {
		return nil, fmt.Errorf("record prompt overhead %s: %w", p.Key, err)
	}
	return o, nil
}

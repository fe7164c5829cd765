package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/errandhq/errand/store"
)

// PromptOverheadGet implements store.Store.
func (s *Store) PromptOverheadGet(ctx context.Context, key string) (*store.PromptOverhead, error) {
	o := &store.PromptOverhead{Key: key}
	var updated int64
	err := s.reader.QueryRowContext(ctx, `SELECT agent, tokens, updated_at FROM prompt_overheads WHERE key = ?`, key).
		Scan(&o.Agent, &o.Tokens, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get prompt overhead %s: %w", key, err)
	}
	o.UpdatedAt = fromMicros(updated)
	return o, nil
}

// PromptOverheadRecord implements store.Store. One statement keeps the
// least figure, so records racing each other keep the smallest.
func (s *Store) PromptOverheadRecord(ctx context.Context, p *store.PromptOverheadRecordParams) (*store.PromptOverhead, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("record prompt overhead %s: %w", p.Key, err)
	}
	o := &store.PromptOverhead{Key: p.Key}
	var updated int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO prompt_overheads (key, agent, tokens, updated_at) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (key) DO UPDATE SET agent = excluded.agent, tokens = excluded.tokens, updated_at = excluded.updated_at
			WHERE excluded.tokens < prompt_overheads.tokens`,
			p.Key, p.Agent, p.Tokens, micros(now(p.Now))).Err()
	})
	if err == nil {
		err = s.reader.QueryRowContext(ctx, `SELECT agent, tokens, updated_at FROM prompt_overheads WHERE key = ?`, p.Key).
			Scan(&o.Agent, &o.Tokens, &updated)
	}
	if err != nil {
		return nil, fmt.Errorf("record prompt overhead %s: %w", p.Key, err)
	}
	o.UpdatedAt = fromMicros(updated)
	return o, nil
}

package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

const memoryColumns = `id, text, tags, task_id, agent, source, estimated_tokens, idempotency_key, created_at`

// maxQueryWords bounds the words of a search; more add little to a rank.
const maxQueryWords = 64

func scanMemory(r pgx.Row) (*store.Memory, error) {
	var (
		m       store.Memory
		tags    string
		key     *string
		created time.Time
	)
	if err := r.Scan(&m.ID, &m.Text, &tags, &m.TaskID, &m.Agent, &m.Source, &m.EstimatedTokens, &key, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(tags), &m.Tags); err != nil {
		return nil, fmt.Errorf("memory %s tags: %w", m.ID, err)
	}
	if m.Tags == nil {
		m.Tags = []string{}
	}
	m.IdempotencyKey = deref(key)
	m.CreatedAt = fromDB(created)
	return &m, nil
}

func getMemory(ctx context.Context, q querier, where string, arg any) (*store.Memory, error) {
	m, err := scanMemory(q.QueryRow(ctx, `SELECT `+memoryColumns+` FROM memories WHERE `+where, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return m, err
}

// insertMemory writes one memory and its event in tx; a known idempotency
// key returns the memory it made.
func (s *Store) insertMemory(ctx context.Context, tx *txn, p *store.MemoryInsertParams, at time.Time) (*store.Memory, bool, error) {
	if p.ID == "" || p.Text == "" || p.Source == "" {
		return nil, false, errors.New("a memory needs an id, text and a source")
	}
	est := store.EstimateTokens(p.Text, p.Tags)
	// A key another transaction writes at the same time is no error: the
	// insert waits for it to commit and does nothing, and the read that
	// follows, a statement of its own, sees what it wrote. Any other
	// conflict (the id) still fails.
	m, err := scanMemory(tx.QueryRow(ctx, `INSERT INTO memories (id, text, tags, task_id, agent, source, estimated_tokens, idempotency_key, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
		RETURNING `+memoryColumns,
		p.ID, p.Text, marshalList(p.Tags), p.TaskID, p.Agent, p.Source, est, nullString(p.IdempotencyKey), at))
	if errors.Is(err, pgx.ErrNoRows) {
		m, err = getMemory(ctx, tx, `idempotency_key = $1`, p.IdempotencyKey)
		return m, false, err
	}
	if err != nil {
		return nil, false, err
	}
	err = tx.appendEvent(p.TaskID, store.EventMemoryCreated, p.Actor,
		&store.MemoryEventData{MemoryID: p.ID, Source: p.Source, EstimatedTokens: est}, at)
	if err != nil {
		return nil, false, err
	}
	return m, true, nil
}

// MemoryInsert implements store.Store.
func (s *Store) MemoryInsert(ctx context.Context, p *store.MemoryInsertParams) (*store.MemoryInsertResult, error) {
	at := now(p.Now)
	res := &store.MemoryInsertResult{}
	err := s.writeTx(ctx, func(tx *txn) error {
		if p.Lease.Token != 0 {
			// The task stays locked: it cannot end before the memory its
			// lease fences in commits.
			if err := s.checkLease(ctx, tx, p.Lease); err != nil {
				return err
			}
		}
		var err error
		res.Memory, res.Inserted, err = s.insertMemory(ctx, tx, p, at)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert memory: %w", err)
	}
	return res, nil
}

// MemoryGetByID implements store.Store.
func (s *Store) MemoryGetByID(ctx context.Context, id string) (*store.Memory, error) {
	m, err := getMemory(ctx, s.pool, `id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("get memory %s: %w", id, err)
	}
	return m, nil
}

// memoryFilter renders the provenance filters shared by list, search and
// purge, on the memories table aliased m; its placeholders follow args.
func memoryFilter(args []any, taskID, agent, source string) (where []string, _ []any) {
	for _, f := range []struct{ column, value string }{{"m.task_id", taskID}, {"m.agent", agent}, {"m.source", source}} {
		if f.value != "" {
			args = append(args, f.value)
			where = append(where, fmt.Sprintf(`%s = $%d`, f.column, len(args)))
		}
	}
	return where, args
}

// MemoryList implements store.Store.
func (s *Store) MemoryList(ctx context.Context, p *store.MemoryListParams) ([]*store.Memory, error) {
	where, args := memoryFilter(nil, p.TaskID, p.Agent, p.Source)
	if !p.Since.IsZero() {
		args = append(args, ceilMicro(p.Since))
		where = append(where, fmt.Sprintf(`m.created_at >= $%d`, len(args)))
	}
	order, after := `DESC`, `<`
	if p.OldestFirst {
		order, after = `ASC`, `>`
	}
	if p.Cursor != "" {
		args = append(args, p.Cursor)
		where = append(where, fmt.Sprintf(`m.id %s $%d`, after, len(args)))
	}
	query := `SELECT ` + prefixed("m.", memoryColumns) + ` FROM memories m`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	args = append(args, max(p.Limit, 1))
	rows, err := s.pool.Query(ctx, query+fmt.Sprintf(` ORDER BY m.id %s LIMIT $%d`, order, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	out, err := collect(rows, scanMemory)
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	return out, nil
}

// queryWords splits what a person typed into the words a search looks
// for. No character is syntax: each word is handed to phraseto_tsquery,
// which reads it as text. Control characters separate words too (a NUL
// cannot reach PostgreSQL), and bytes that are not UTF-8 are dropped.
func queryWords(q string) []string {
	words := strings.FieldsFunc(strings.ToValidUTF8(q, ""), func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	if len(words) > maxQueryWords {
		words = words[:maxQueryWords]
	}
	return words
}

// memorySearchQuery is the tsquery of the words in $1: each word the
// phrase of its lexemes (as an FTS5 quoted string is), the phrases joined
// with OR so that a memory matching more of them ranks higher. A word of
// stop words or punctuation only has no lexeme and is left out; with none
// left the query is NULL and matches nothing. The text form of a tsquery
// PostgreSQL made is read back as it was.
const memorySearchQuery = `(SELECT string_agg('(' || w::text || ')', ' | ')::tsquery
	FROM (SELECT phraseto_tsquery('english', fold_accents(word)) AS w FROM unnest($1::text[]) AS word) AS words
	WHERE numnode(w) > 0)`

// MemorySearch implements store.Store. Rank is ts_rank (higher is a better
// match), then the newest first.
func (s *Store) MemorySearch(ctx context.Context, p *store.MemorySearchParams) ([]*store.Memory, error) {
	words := queryWords(p.Query)
	if len(words) == 0 {
		return nil, nil
	}
	where, args := memoryFilter([]any{words}, p.TaskID, p.Agent, p.Source)
	where = append([]string{`m.search @@ q.q`}, where...)
	args = append(args, max(p.Limit, 1))
	query := `SELECT ` + prefixed("m.", memoryColumns) + ` FROM memories m, ` + memorySearchQuery + ` AS q(q)
		WHERE ` + strings.Join(where, ` AND `) + fmt.Sprintf(` ORDER BY ts_rank(m.search, q.q) DESC, m.id DESC LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("search memories: %w", err)
	}
	out, err := collect(rows, scanMemory)
	if err != nil {
		return nil, fmt.Errorf("search memories: %w", err)
	}
	return out, nil
}

// MemoryDelete implements store.Store.
func (s *Store) MemoryDelete(ctx context.Context, p *store.MemoryDeleteParams) error {
	at := now(p.Now)
	err := s.writeTx(ctx, func(tx *txn) error {
		var taskID, source string
		err := tx.QueryRow(ctx, `DELETE FROM memories WHERE id = $1 RETURNING task_id, source`, p.ID).Scan(&taskID, &source)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		return tx.appendEvent(taskID, store.EventMemoryDeleted, p.Actor, &store.MemoryEventData{MemoryID: p.ID, Source: source}, at)
	})
	if err != nil {
		return fmt.Errorf("delete memory %s: %w", p.ID, err)
	}
	return nil
}

// MemoryPurge implements store.Store.
func (s *Store) MemoryPurge(ctx context.Context, p *store.MemoryPurgeParams) (int64, error) {
	where, args := memoryFilter(nil, p.TaskID, p.Agent, p.Source)
	data := &store.MemoryPurgeData{TaskID: p.TaskID, Agent: p.Agent, Source: p.Source}
	if !p.CreatedBefore.IsZero() {
		args = append(args, ceilMicro(p.CreatedBefore))
		where = append(where, fmt.Sprintf(`m.created_at < $%d`, len(args)))
		before := p.CreatedBefore.UTC()
		data.CreatedBefore = &before
	}
	if len(where) == 0 {
		return 0, store.ErrMemoryPurgeAll
	}
	at := now(p.Now)
	err := s.writeTx(ctx, func(tx *txn) error {
		tag, err := tx.Exec(ctx, `DELETE FROM memories AS m WHERE `+strings.Join(where, ` AND `), args...)
		if err != nil {
			return err
		}
		data.Count = tag.RowsAffected()
		if data.Count == 0 {
			return nil
		}
		return tx.appendEvent(p.TaskID, store.EventMemoryPurged, p.Actor, data, at)
	})
	if err != nil {
		return 0, fmt.Errorf("purge memories: %w", err)
	}
	return data.Count, nil
}

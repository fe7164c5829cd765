package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/errandhq/errand/store"
)

const memoryColumns = `id, text, tags, task_id, agent, source, estimated_tokens, idempotency_key, created_at`

// maxQueryWords bounds the words of a search; more add little to a rank.
const maxQueryWords = 64

func scanMemory(r rowScanner) (*store.Memory, error) {
	var (
		m       store.Memory
		tags    string
		key     sql.NullString
		created int64
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
	m.IdempotencyKey = key.String
	m.CreatedAt = fromMicros(created)
	return &m, nil
}

func getMemory(ctx context.Context, q querier, where string, arg any) (*store.Memory, error) {
	m, err := scanMemory(q.QueryRowContext(ctx, `SELECT `+memoryColumns+` FROM memories WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return m, err
}

// insertMemory writes one memory and its event in tx; a known idempotency
// key returns the memory it made.
func (s *Store) insertMemory(ctx context.Context, tx *sql.Tx, p *store.MemoryInsertParams, at time.Time) (*store.Memory, bool, error) {
	if p.ID == "" || p.Text == "" || p.Source == "" {
		return nil, false, errors.New("a memory needs an id, text and a source")
	}
	if p.IdempotencyKey != "" {
		m, err := getMemory(ctx, tx, `idempotency_key = ?`, p.IdempotencyKey)
		if err == nil {
			return m, false, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, false, err
		}
	}
	est := store.EstimateTokens(p.Text, p.Tags)
	_, err := tx.ExecContext(ctx, `INSERT INTO memories (id, text, tags, task_id, agent, source, estimated_tokens, idempotency_key, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.Text, marshalList(p.Tags), p.TaskID, p.Agent, p.Source, est, nullString(p.IdempotencyKey), micros(at))
	if err != nil {
		return nil, false, err
	}
	err = s.appendEvent(ctx, tx, p.TaskID, store.EventMemoryCreated, p.Actor,
		&store.MemoryEventData{MemoryID: p.ID, Source: p.Source, EstimatedTokens: est}, at)
	if err != nil {
		return nil, false, err
	}
	m, err := getMemory(ctx, tx, `id = ?`, p.ID)
	return m, true, err
}

// MemoryInsert implements store.Store.
func (s *Store) MemoryInsert(ctx context.Context, p *store.MemoryInsertParams) (*store.MemoryInsertResult, error) {
	at := now(p.Now)
	res := &store.MemoryInsertResult{}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if p.Lease.Token != 0 {
			ls, err := s.leaseState(ctx, tx, p.Lease.TaskID)
			if err != nil {
				return err
			}
			if ls.token != p.Lease.Token || ls.status != store.StatusRunning {
				return store.ErrLeaseLost
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
	m, err := getMemory(ctx, s.reader, `id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("get memory %s: %w", id, err)
	}
	return m, nil
}

// memoryFilter renders the provenance filters shared by list, search and
// purge, on the memories table aliased m.
func memoryFilter(taskID, agent, source string) (where []string, args []any) {
	if taskID != "" {
		where, args = append(where, `m.task_id = ?`), append(args, taskID)
	}
	if agent != "" {
		where, args = append(where, `m.agent = ?`), append(args, agent)
	}
	if source != "" {
		where, args = append(where, `m.source = ?`), append(args, source)
	}
	return where, args
}

// MemoryList implements store.Store.
func (s *Store) MemoryList(ctx context.Context, p *store.MemoryListParams) ([]*store.Memory, error) {
	where, args := memoryFilter(p.TaskID, p.Agent, p.Source)
	if !p.Since.IsZero() {
		where, args = append(where, `m.created_at >= ?`), append(args, ceilMicros(p.Since))
	}
	order := `DESC`
	if p.Cursor != "" {
		if p.OldestFirst {
			where = append(where, `m.id > ?`)
		} else {
			where = append(where, `m.id < ?`)
		}
		args = append(args, p.Cursor)
	}
	if p.OldestFirst {
		order = `ASC`
	}
	query := `SELECT ` + prefixed("m.", memoryColumns) + ` FROM memories m`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	rows, err := s.reader.QueryContext(ctx, query+` ORDER BY m.id `+order+` LIMIT ?`, append(args, max(p.Limit, 1))...)
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	out, err := collect(rows, scanMemory)
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	return out, nil
}

// ftsQuery turns what a person typed into an FTS5 query that cannot be a
// syntax error: each word becomes a quoted string (quotes doubled inside),
// which FTS5 reads as a phrase of the tokens in it, and the phrases are
// joined with OR so that a memory matching more of them ranks higher. ""
// when there is no word.
func ftsQuery(q string) string {
	// Control characters separate words too: a NUL must not reach FTS5.
	words := strings.FieldsFunc(q, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	if len(words) > maxQueryWords {
		words = words[:maxQueryWords]
	}
	for i, w := range words {
		words[i] = `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
	}
	return strings.Join(words, " OR ")
}

// MemorySearch implements store.Store. Rank is FTS5's bm25 (lower is a
// better match), then the newest first.
func (s *Store) MemorySearch(ctx context.Context, p *store.MemorySearchParams) ([]*store.Memory, error) {
	match := ftsQuery(p.Query)
	if match == "" {
		return nil, nil
	}
	where, args := memoryFilter(p.TaskID, p.Agent, p.Source)
	where, args = append([]string{`memories_fts MATCH ?`}, where...), append([]any{match}, args...)
	query := `SELECT ` + prefixed("m.", memoryColumns) + ` FROM memories_fts JOIN memories m ON m.rid = memories_fts.rowid
		WHERE ` + strings.Join(where, ` AND `) + ` ORDER BY bm25(memories_fts), m.id DESC LIMIT ?`
	rows, err := s.reader.QueryContext(ctx, query, append(args, max(p.Limit, 1))...)
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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		m, err := getMemory(ctx, tx, `id = ?`, p.ID)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM memories WHERE id = ?`, p.ID); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, m.TaskID, store.EventMemoryDeleted, p.Actor, &store.MemoryEventData{MemoryID: m.ID, Source: m.Source}, at)
	})
	if err != nil {
		return fmt.Errorf("delete memory %s: %w", p.ID, err)
	}
	return nil
}

// MemoryPurge implements store.Store.
func (s *Store) MemoryPurge(ctx context.Context, p *store.MemoryPurgeParams) (int64, error) {
	where, args := memoryFilter(p.TaskID, p.Agent, p.Source)
	data := &store.MemoryPurgeData{TaskID: p.TaskID, Agent: p.Agent, Source: p.Source}
	if !p.CreatedBefore.IsZero() {
		where, args = append(where, `m.created_at < ?`), append(args, ceilMicros(p.CreatedBefore))
		before := p.CreatedBefore.UTC()
		data.CreatedBefore = &before
	}
	if len(where) == 0 {
		return 0, store.ErrMemoryPurgeAll
	}
	at := now(p.Now)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM memories AS m WHERE `+strings.Join(where, ` AND `), args...)
		if err != nil {
			return err
		}
		data.Count, _ = res.RowsAffected()
		if data.Count == 0 {
			return nil
		}
		return s.appendEvent(ctx, tx, p.TaskID, store.EventMemoryPurged, p.Actor, data, at)
	})
	if err != nil {
		return 0, fmt.Errorf("purge memories: %w", err)
	}
	return data.Count, nil
}

// prefixed qualifies each column of a column list.
func prefixed(prefix, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

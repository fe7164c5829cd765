package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/errandhq/errand/store"
)

// memoryColumns are the columns a memory is written with (an import
// writes them all); memorySelect reads them back with whether the memory
// has a vector, never the vector itself.
const (
	memoryColumns = `id, text, tags, task_id, agent, source, estimated_tokens, idempotency_key, created_at,
	category, subject, flag, refreshed_at, refreshed_by`
	memorySelect = memoryColumns + `, embedding IS NOT NULL`
)

// maxQueryWords bounds the words of a search; more add little to a rank.
const maxQueryWords = 64

func scanMemory(r pgx.Row) (*store.Memory, error) {
	var (
		m         store.Memory
		tags      string
		key, flag *string
		created   time.Time
		refreshed *time.Time
	)
	err := r.Scan(&m.ID, &m.Text, &tags, &m.TaskID, &m.Agent, &m.Source, &m.EstimatedTokens, &key, &created,
		&m.Category, &m.Subject, &flag, &refreshed, &m.RefreshedBy, &m.HasEmbedding)
	if err != nil {
		return nil, err
	}
	if err := store.DecodeMemoryJSON(&m, tags, flag); err != nil {
		return nil, err
	}
	m.IdempotencyKey = deref(key)
	m.CreatedAt = fromDB(created)
	if refreshed != nil {
		t := fromDB(*refreshed)
		m.RefreshedAt = &t
	}
	return &m, nil
}

func getMemory(ctx context.Context, q querier, where string, arg any) (*store.Memory, error) {
	m, err := scanMemory(q.QueryRow(ctx, `SELECT `+memorySelect+` FROM memories WHERE `+where, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return m, err
}

var _ store.MemoryWriter = execTx{}

// insertMemory writes one memory and its events in tx (see
// store.InsertMemory).
func (s *Store) insertMemory(ctx context.Context, tx *txn, p *store.MemoryInsertParams, at time.Time) (*store.Memory, bool, error) {
	return store.InsertMemory(ctx, execTx{s, tx}, p, at)
}

// MemoryInsertRow implements store.MemoryWriter. A key another
// transaction writes at the same time is no error: the insert waits for
// it to commit and does nothing, and the read that follows, a statement
// of its own, sees what it wrote. Any other conflict (the id) still fails.
func (x execTx) MemoryInsertRow(ctx context.Context, p *store.MemoryInsertParams, est int, at time.Time) (*store.Memory, bool, error) {
	embedding, err := store.MemoryVector(p.Embedding)
	if err != nil {
		return nil, false, err
	}
	m, err := scanMemory(x.tx.QueryRow(ctx, `INSERT INTO memories (`+memoryColumns+`, embedding)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULL, '', $13)
		ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
		RETURNING `+memorySelect,
		p.ID, p.Text, marshalList(p.Tags), p.TaskID, p.Agent, p.Source, est, nullString(p.IdempotencyKey), at,
		cmp.Or(p.Category, store.CategoryFact), p.Subject, store.MemoryFlagJSON(p.Flagged, at), embedding))
	if errors.Is(err, pgx.ErrNoRows) {
		m, err = getMemory(ctx, x.tx, `idempotency_key = $1`, p.IdempotencyKey)
		return m, false, err
	}
	return m, err == nil, err
}

// MemoryRefreshRow implements store.MemoryWriter.
func (x execTx) MemoryRefreshRow(ctx context.Context, id, taskID string, at time.Time) (*store.Memory, error) {
	m, err := scanMemory(x.tx.QueryRow(ctx, `UPDATE memories SET refreshed_at = $2, refreshed_by = $3 WHERE id = $1
		RETURNING `+memorySelect, id, at, taskID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return m, err
}

// MemoryFlagRow implements store.MemoryWriter.
func (x execTx) MemoryFlagRow(ctx context.Context, id string, flag *store.MemoryFlag, at time.Time) (*store.Memory, bool, error) {
	m, err := scanMemory(x.tx.QueryRow(ctx, `UPDATE memories SET flag = $2 WHERE id = $1 AND flag IS NULL
		RETURNING `+memorySelect, id, store.MemoryFlagJSON(flag, at)))
	if errors.Is(err, pgx.ErrNoRows) {
		// Unknown, or flagged already.
		m, err = getMemory(ctx, x.tx, `id = $1`, id)
		return m, false, err
	}
	return m, err == nil, err
}

// MemoryForRelease implements store.MemoryWriter. Locked: a release at
// the same time waits, then finds it released and journals nothing.
func (x execTx) MemoryForRelease(ctx context.Context, id string) (*store.Memory, error) {
	return getMemory(ctx, x.tx, `id = $1 FOR UPDATE`, id)
}

// MemoryUnflag implements store.MemoryWriter.
func (x execTx) MemoryUnflag(ctx context.Context, id string) error {
	_, err := x.tx.Exec(ctx, `UPDATE memories SET flag = NULL WHERE id = $1`, id)
	return err
}

// MemoryConflictInsert implements store.MemoryWriter.
func (x execTx) MemoryConflictInsert(ctx context.Context, p *store.MemoryConflictParams, at time.Time) (bool, error) {
	tag, err := x.tx.Exec(ctx, `INSERT INTO memory_conflicts (newer_id, older_id, subject, created_at)
		VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, p.NewerID, p.OlderID, p.Subject, at)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// MemoryDeleteRow implements store.MemoryWriter.
func (x execTx) MemoryDeleteRow(ctx context.Context, id string) (string, string, error) {
	var taskID, source string
	err := x.tx.QueryRow(ctx, `DELETE FROM memories WHERE id = $1 RETURNING task_id, source`, id).Scan(&taskID, &source)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", store.ErrNotFound
	}
	return taskID, source, err
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

// flaggedFilter renders a Flagged filter on the memories table aliased m.
func flaggedFilter(where []string, flagged *bool) []string {
	switch {
	case flagged == nil:
		return where
	case *flagged:
		return append(where, `m.flag IS NOT NULL`)
	}
	return append(where, `m.flag IS NULL`)
}

// MemoryList implements store.Store.
func (s *Store) MemoryList(ctx context.Context, p *store.MemoryListParams) ([]*store.Memory, error) {
	where, args := memoryFilter(nil, p.TaskID, p.Agent, p.Source)
	where = flaggedFilter(where, p.Flagged)
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
	query := `SELECT ` + prefixed("m.", memorySelect) + ` FROM memories m`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	args = append(args, max(p.Limit, 1))
	out, err := queryAll(ctx, s.pool, scanMemory, query+fmt.Sprintf(` ORDER BY m.id %s LIMIT $%d`, order, len(args)), args...)
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
	where = flaggedFilter(where, p.Flagged)
	where = append([]string{`m.search @@ q.q`}, where...)
	args = append(args, max(p.Limit, 1))
	query := `SELECT ` + prefixed("m.", memorySelect) + ` FROM memories m, ` + memorySearchQuery + ` AS q(q)
		WHERE ` + strings.Join(where, ` AND `) + fmt.Sprintf(` ORDER BY ts_rank(m.search, q.q) DESC, m.id DESC LIMIT $%d`, len(args))
	out, err := queryAll(ctx, s.pool, scanMemory, query, args...)
	if err != nil {
		return nil, fmt.Errorf("search memories: %w", err)
	}
	return out, nil
}

// MemoryNearest implements store.Store: the vectors stream through
// store.FindNearest, then the best are read.
func (s *Store) MemoryNearest(ctx context.Context, p *store.MemoryNearestParams) ([]*store.MemoryNearest, error) {
	out, err := store.FindNearest(p, func(offer func(string, time.Time, []byte)) error {
		where := flaggedFilter([]string{`m.embedding IS NOT NULL`}, p.Flagged)
		rows, err := s.pool.Query(ctx, `SELECT m.id, m.created_at, m.embedding FROM memories m WHERE `+strings.Join(where, ` AND `))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id      string
				created time.Time
				vec     pgtype.DriverBytes // read in place: valid until the next row
			)
			if err := rows.Scan(&id, &created, &vec); err != nil {
				return err
			}
			offer(id, created, vec)
		}
		return rows.Err()
	}, func(ids []string) ([]*store.Memory, error) {
		return queryAll(ctx, s.pool, scanMemory, `SELECT `+memorySelect+` FROM memories WHERE id = ANY($1)`, ids)
	})
	if err != nil {
		return nil, fmt.Errorf("nearest memories: %w", err)
	}
	return out, nil
}

// MemoryPurge implements store.Store.
func (s *Store) MemoryPurge(ctx context.Context, p *store.MemoryPurgeParams) (int64, error) {
	data, err := store.PlanMemoryPurge(p)
	if err != nil {
		return 0, err
	}
	where, args := memoryFilter(nil, p.TaskID, p.Agent, p.Source)
	if !p.CreatedBefore.IsZero() {
		args = append(args, ceilMicro(p.CreatedBefore))
		where = append(where, fmt.Sprintf(`m.created_at < $%d`, len(args)))
	}
	at := s.now(p.Now)
	err = s.writeTx(ctx, func(tx *txn) error {
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

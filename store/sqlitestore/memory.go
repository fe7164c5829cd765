package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

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

func scanMemory(r rowScanner) (*store.Memory, error) {
	var (
		m         store.Memory
		tags      string
		key       sql.NullString
		flag      *string
		created   int64
		refreshed sql.NullInt64
	)
	err := r.Scan(&m.ID, &m.Text, &tags, &m.TaskID, &m.Agent, &m.Source, &m.EstimatedTokens, &key, &created,
		&m.Category, &m.Subject, &flag, &refreshed, &m.RefreshedBy, &m.HasEmbedding)
	if err != nil {
		return nil, err
	}
	if err := store.DecodeMemoryJSON(&m, tags, flag); err != nil {
		return nil, err
	}
	m.IdempotencyKey = key.String
	m.CreatedAt = fromMicros(created)
	if refreshed.Valid {
		t := fromMicros(refreshed.Int64)
		m.RefreshedAt = &t
	}
	return &m, nil
}

func getMemory(ctx context.Context, q querier, where string, arg any) (*store.Memory, error) {
	m, err := scanMemory(q.QueryRowContext(ctx, `SELECT `+memorySelect+` FROM memories WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return m, err
}

// memoryFlag is how a flag is stored (see store.MemoryFlagJSON).
func memoryFlag(f *store.MemoryFlag, at time.Time) sql.NullString {
	j := store.MemoryFlagJSON(f, at)
	if j == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *j, Valid: true}
}

var _ store.MemoryWriter = execTx{}

// insertMemory writes one memory and its events in tx (see
// store.InsertMemory).
func (s *Store) insertMemory(ctx context.Context, tx *sql.Tx, p *store.MemoryInsertParams, at time.Time) (*store.Memory, bool, error) {
	return store.InsertMemory(ctx, execTx{s, tx}, p, at)
}

// MemoryInsertRow implements store.MemoryWriter: the key is looked up
// first, as the write transaction is the only one.
func (x execTx) MemoryInsertRow(ctx context.Context, p *store.MemoryInsertParams, est int, at time.Time) (*store.Memory, bool, error) {
	if p.IdempotencyKey != "" {
		m, err := getMemory(ctx, x.tx, `idempotency_key = ?`, p.IdempotencyKey)
		if err == nil {
			return m, false, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, false, err
		}
	}
	embedding, err := store.MemoryVector(p.Embedding)
	if err != nil {
		return nil, false, err
	}
	_, err = x.tx.ExecContext(ctx, `INSERT INTO memories (`+memoryColumns+`, embedding)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, '', ?)`,
		p.ID, p.Text, marshalList(p.Tags), p.TaskID, p.Agent, p.Source, est, nullString(p.IdempotencyKey), micros(at),
		cmp.Or(p.Category, store.CategoryFact), p.Subject, memoryFlag(p.Flagged, at), embedding)
	if err != nil {
		return nil, false, err
	}
	m, err := getMemory(ctx, x.tx, `id = ?`, p.ID)
	return m, err == nil, err
}

// MemoryRefreshRow implements store.MemoryWriter.
func (x execTx) MemoryRefreshRow(ctx context.Context, id, taskID string, at time.Time) (*store.Memory, error) {
	res, err := x.tx.ExecContext(ctx, `UPDATE memories SET refreshed_at = ?, refreshed_by = ? WHERE id = ?`, micros(at), taskID, id)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, store.ErrNotFound
	}
	return getMemory(ctx, x.tx, `id = ?`, id)
}

// MemoryFlagRow implements store.MemoryWriter.
func (x execTx) MemoryFlagRow(ctx context.Context, id string, flag *store.MemoryFlag, at time.Time) (*store.Memory, bool, error) {
	m, err := getMemory(ctx, x.tx, `id = ?`, id)
	if err != nil || m.Flagged != nil {
		return m, false, err
	}
	if _, err := x.tx.ExecContext(ctx, `UPDATE memories SET flag = ? WHERE id = ?`, memoryFlag(flag, at), id); err != nil {
		return nil, false, err
	}
	m, err = getMemory(ctx, x.tx, `id = ?`, id)
	return m, err == nil, err
}

// MemoryForRelease implements store.MemoryWriter.
func (x execTx) MemoryForRelease(ctx context.Context, id string) (*store.Memory, error) {
	return getMemory(ctx, x.tx, `id = ?`, id)
}

// MemoryUnflag implements store.MemoryWriter.
func (x execTx) MemoryUnflag(ctx context.Context, id string) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE memories SET flag = NULL WHERE id = ?`, id)
	return err
}

// MemoryConflictInsert implements store.MemoryWriter.
func (x execTx) MemoryConflictInsert(ctx context.Context, p *store.MemoryConflictParams, at time.Time) (bool, error) {
	res, err := x.tx.ExecContext(ctx, `INSERT INTO memory_conflicts (newer_id, older_id, subject, created_at)
		VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, p.NewerID, p.OlderID, p.Subject, micros(at))
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// MemoryDeleteRow implements store.MemoryWriter.
func (x execTx) MemoryDeleteRow(ctx context.Context, id string) (string, string, error) {
	m, err := getMemory(ctx, x.tx, `id = ?`, id)
	if err != nil {
		return "", "", err
	}
	if _, err := x.tx.ExecContext(ctx, `DELETE FROM memories WHERE id = ?`, id); err != nil {
		return "", "", err
	}
	return m.TaskID, m.Source, nil
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
	where, args := memoryFilter(p.TaskID, p.Agent, p.Source)
	where = flaggedFilter(where, p.Flagged)
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
	query := `SELECT ` + prefixed("m.", memorySelect) + ` FROM memories m`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	out, err := queryAll(ctx, s.reader, scanMemory, query+` ORDER BY m.id `+order+` LIMIT ?`, append(args, max(p.Limit, 1))...)
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	return out, nil
}

// ftsQuery turns what a person typed into an FTS5 query that cannot be a
// syntax error: each word becomes a quoted string (quotes doubled inside),
// which FTS5 reads as a phrase of the tokens in it, and the phrases are
// joined with OR so that a memory matching more of them ranks higher.
// English stop words are left out unless nothing else is left: each
// matches nearly every memory, so it would make a search rank the whole
// table for nothing (PostgreSQL's english configuration drops them too).
// "" when there is no word.
func ftsQuery(q string) string {
	// Control characters separate words too: a NUL must not reach FTS5.
	words := strings.FieldsFunc(q, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	if kept := slices.DeleteFunc(slices.Clone(words), isStopword); len(kept) > 0 {
		words = kept
	}
	if len(words) > maxQueryWords {
		words = words[:maxQueryWords]
	}
	for i, w := range words {
		words[i] = `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
	}
	return strings.Join(words, " OR ")
}

// stopwords are common English words, as PostgreSQL's english
// configuration has them.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because been
		before being below between both but by can could did do does doing don down during each few for from further
		had has have having he her here hers herself him himself his how i if in into is it its itself just me more most
		my myself no nor not now of off on once only or other our ours ourselves out over own same she should so some
		such than that the their theirs them themselves then there these they this those through to too under until up
		very was we were what when where which while who whom why will with would you your yours yourself yourselves`) {
		m[w] = true
	}
	return m
}()

// isStopword reports whether a query word is a stop word, whatever its
// case and the punctuation around it.
func isStopword(w string) bool {
	return stopwords[strings.ToLower(strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }))]
}

// MemorySearch implements store.Store. Rank is FTS5's bm25 (lower is a
// better match), then the newest first.
func (s *Store) MemorySearch(ctx context.Context, p *store.MemorySearchParams) ([]*store.Memory, error) {
	match := ftsQuery(p.Query)
	if match == "" {
		return nil, nil
	}
	where, args := memoryFilter(p.TaskID, p.Agent, p.Source)
	where = flaggedFilter(where, p.Flagged)
	where, args = append([]string{`memories_fts MATCH ?`}, where...), append([]any{match}, args...)
	query := `SELECT ` + prefixed("m.", memorySelect) + ` FROM memories_fts JOIN memories m ON m.rid = memories_fts.rowid
		WHERE ` + strings.Join(where, ` AND `) + ` ORDER BY bm25(memories_fts), m.id DESC LIMIT ?`
	out, err := queryAll(ctx, s.reader, scanMemory, query, append(args, max(p.Limit, 1))...)
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
		rows, err := s.reader.QueryContext(ctx, `SELECT m.id, m.created_at, m.embedding FROM memories m WHERE `+strings.Join(where, ` AND `))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id      string
				created int64
				vec     sql.RawBytes // read in place: valid until the next row
			)
			if err := rows.Scan(&id, &created, &vec); err != nil {
				return err
			}
			offer(id, fromMicros(created), vec)
		}
		return rows.Err()
	}, func(ids []string) ([]*store.Memory, error) {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		return queryAll(ctx, s.reader, scanMemory, `SELECT `+memorySelect+` FROM memories WHERE id IN (`+placeholders(len(args))+`)`, args...)
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
	where, args := memoryFilter(p.TaskID, p.Agent, p.Source)
	if !p.CreatedBefore.IsZero() {
		where, args = append(where, `m.created_at < ?`), append(args, ceilMicros(p.CreatedBefore))
	}
	at := now(p.Now)
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
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

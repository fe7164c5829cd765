package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

// journalLock orders the journal. Sequence values are handed out when a
// row is inserted, not when its transaction commits, so two transactions
// can commit out of id order: a reader that has seen id 7 and asks for
// ids above it would never see a 6 that commits later. Every transaction
// therefore appends its events last, after taking this transaction-scoped
// lock, which it holds until it commits: the next transaction's events get
// higher ids and become visible after these. Only the event inserts and
// the commit run under the lock.
const journalLock int64 = 0x6572_7261_6e64_6a // "errandj"

// pendingEvent is an event a transaction appends just before it commits.
type pendingEvent struct {
	taskID, typ, actor string
	data               []byte
	at                 time.Time
	// transition is data when it was one, for the notification's text.
	transition *store.TransitionData
	// inboxText, when set, is the text of the owner's notification this
	// event writes whatever its task (an alert).
	inboxText *string
}

// sqlAppendEvents inserts events ($1-$5, in order) and their inbox
// notifications ($6-$11, each naming its event by position) and returns
// the events' ids in order. It runs under the journal lock, so the ids,
// which follow the insert order, also follow commit order.
const sqlAppendEvents = `WITH appended AS (
		INSERT INTO task_events (task_id, type, actor, data, created_at)
		SELECT task_id, type, actor, data::json, created_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) WITH ORDINALITY
			AS e(task_id, type, actor, data, created_at, n)
		ORDER BY n
		RETURNING id
	), numbered AS (
		SELECT id, row_number() OVER (ORDER BY id) AS n FROM appended
	), inbox AS (
		INSERT INTO notifications (session_id, task_id, event_id, event_type, text, created_at)
		SELECT i.session_id, i.task_id, numbered.id, i.event_type, i.text, i.created_at
		FROM unnest($6::bigint[], $7::text[], $8::text[], $9::text[], $10::text[], $11::timestamptz[])
			AS i(n, session_id, task_id, event_type, text, created_at)
		JOIN numbered ON numbered.n = i.n
		ORDER BY i.n
	)
	SELECT id FROM numbered ORDER BY id`

// appendEventsQuery is the statement that appends evs and the
// notifications in inbox.
func appendEventsQuery(evs []pendingEvent, inbox inboxRows) *pgx.QueuedQuery {
	var (
		taskIDs, types, actors, data = make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs))
		ats                          = make([]time.Time, len(evs))
	)
	for i, e := range evs {
		taskIDs[i], types[i], actors[i], ats[i] = e.taskID, e.typ, cmp.Or(e.actor, store.ActorSystem), e.at
		data[i] = "{}"
		if len(e.data) > 0 {
			data[i] = string(e.data)
		}
	}
	return &pgx.QueuedQuery{SQL: sqlAppendEvents, Arguments: []any{
		taskIDs, types, actors, data, ats,
		inbox.event, inbox.sessions, inbox.tasks, inbox.types, inbox.texts, inbox.ats,
	}}
}

// EventList implements store.Store.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) ([]*store.Event, error) {
	where := []string{`id > $1`}
	args := []any{p.AfterID}
	if p.TaskID != "" {
		args = append(args, p.TaskID)
		where = append(where, fmt.Sprintf(`task_id = $%d`, len(args)))
	}
	if !p.Since.IsZero() {
		args = append(args, ceilMicro(p.Since))
		where = append(where, fmt.Sprintf(`created_at >= $%d`, len(args)))
	}
	if len(p.Types) > 0 {
		args = append(args, p.Types)
		where = append(where, fmt.Sprintf(`type = ANY($%d)`, len(args)))
	}
	args = append(args, max(p.Limit, 1))
	rows, err := s.pool.Query(ctx, `SELECT id, task_id, type, actor, data::text, created_at FROM task_events WHERE `+
		strings.Join(where, ` AND `)+fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Event, error) {
		var (
			e    store.Event
			data string
		)
		if err := row.Scan(&e.ID, &e.TaskID, &e.Type, &e.Actor, &data, &e.CreatedAt); err != nil {
			return nil, err
		}
		e.Data, e.CreatedAt = []byte(data), e.CreatedAt.UTC()
		return &e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

// EventLastID implements store.Store.
func (s *Store) EventLastID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM task_events`).Scan(&id); err != nil {
		return 0, fmt.Errorf("last event id: %w", err)
	}
	return id, nil
}

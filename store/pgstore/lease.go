package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/crashpoint"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

// claimable is where a claim may come from, straight from the transition
// table; the tasks_ready index is declared over the same list.
var claimable = sqlval.StatusList(store.SourcesOf(store.StatusRunning))

// sqlClaim picks the ready tasks and claims them in one statement: the CTE
// locks the rows it picks, skipping those another claim holds, and the
// UPDATE claims exactly the rows it locked (an `id IN (SELECT … LIMIT)`
// may be evaluated again and claim more than the limit).
//
// A task in a lane is ready only when no task of its lane runs and no
// ready task of its lane comes before it: each lane offers its head. Two
// claims whose snapshots differ may still see different heads of one
// lane; the unique index tasks_lane_running then fails the later one,
// which claims again (see TaskLeaseMany).
//
// "r.lane IS NOT NULL" lets the busy-lane check read tasks_lane_running
// (at most one row per lane) rather than every running task.
//
// A claim clears what earlier attempts reserved of the budget and never
// released: those attempts are over.
//
// A claim that decided its floor from the cached spend guard runs only
// while the stored guard has the text it was decided from ($7, $8; NULL:
// the guard was read in this transaction).
var sqlClaim = `WITH ready AS (` + selectReady(`
		  AND ($7::text IS NULL OR (SELECT limits::text = $7 AND state::text = $8 FROM spend_guard WHERE id = 1))`, "id, status") + `
		FOR UPDATE SKIP LOCKED
	)
	UPDATE tasks SET ` + claimSet + `
	FROM ready WHERE tasks.id = ready.id
	RETURNING ready.status, ` + prefixed("tasks.", taskColumns)

// claimSet is what a claim writes.
const claimSet = `status = 'running', lease_owner = $5, lease_expires_at = $6,
		lease_token = lease_token + 1, attempt = attempt + 1 - attempt_open, attempt_open = 0, reserved = NULL, spend_reserved = 0,
		started_at = coalesce(started_at, $1), updated_at = $1`

// selectReady is the ready-task query with more conditions, returning
// columns, in claim order: priority, then turn (pass, see passFor),
// run_at and id.
func selectReady(more, columns string) string {
	return `SELECT ` + columns + ` FROM tasks
		WHERE status IN (` + claimable + `) AND run_at <= $1
		  AND ($2::text[] IS NULL OR agent = ANY($2::text[]))
		  AND (lane IS NULL OR (
		    NOT EXISTS (SELECT 1 FROM tasks r
		      WHERE r.lane = tasks.lane AND r.lane IS NOT NULL AND r.status = 'running')
		    AND NOT EXISTS (SELECT 1 FROM tasks e
		      WHERE e.lane = tasks.lane AND e.status IN (` + claimable + `) AND e.run_at <= $1
		        AND (e.priority > tasks.priority OR e.priority = tasks.priority
		          AND (e.run_at, e.id) < (tasks.run_at, tasks.id)))))
		  AND priority >= $4` + more + `
		ORDER BY priority DESC, pass, run_at, id
		LIMIT $3`
}

// sqlSelectReadyLimited also leaves out the tasks of keys with no room
// left ($5: concurrency keys, $6: agents) and those already taken ($7),
// and returns each task's keys, locking the rows it returns.
var sqlSelectReadyLimited = selectReady(`
		  AND (concurrency_key IS NULL OR NOT concurrency_key = ANY($5::text[]))
		  AND NOT agent = ANY($6::text[])
		  AND NOT id = ANY($7::text[])`, "id, status, concurrency_key, agent") + `
		FOR UPDATE SKIP LOCKED`

// sqlClaimIDs claims the tasks a limited claim picked and locked.
var sqlClaimIDs = `UPDATE tasks SET ` + strings.NewReplacer("$5", "$3", "$6", "$4").Replace(claimSet) + `
	WHERE id = ANY($2::text[]) AND status IN (` + claimable + `)
	RETURNING ` + taskColumns

// limitsLock is the transaction-level advisory lock claims held to
// concurrency limits take, so two of them never both count the same room.
const limitsLock = 0x657272616e64 // "errand"

// laneIndex is the unique index that holds at most one running task per
// lane.
const laneIndex = "tasks_lane_running"

// TaskLeaseMany implements store.Store.
func (s *Store) TaskLeaseMany(ctx context.Context, p *store.TaskLeaseManyParams) ([]*store.Task, error) {
	if p.Limit < 1 {
		return nil, nil
	}
	at := s.now(p.Now)
	expires := at.Add(p.TTL)
	var agents []string
	if p.Agents != nil {
		agents = append([]string{}, p.Agents...) // non-nil: an empty list claims nothing
	}

	var claimed []*store.Task
	var err error
	for attempt := 1; ; attempt++ {
		claimed, err = s.claim(ctx, p.Owner, agents, p.Limit, p.Limits, at, expires)
		// A lane conflict means another claim committed a running task
		// of that lane meanwhile: claiming again sees it.
		if err == nil || !laneConflict(err) || attempt >= maxTxAttempts || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("lease tasks: %w", err)
	}
	return claimed, nil
}

func (s *Store) claim(ctx context.Context, owner string, agents []string, limit int, limits map[string]int, at, expires time.Time) ([]*store.Task, error) {
	var claimed []*store.Task
	err := s.writeTx(ctx, func(tx *txn) error {
		claimed = claimed[:0]
		// The claim must walk tasks_ready in its order and stop at the
		// limit. Statistics lag a queue that grows fast (a new database's
		// first burst); from stale ones the planner may rather collect
		// every ready task by bitmap and sort them, costing milliseconds
		// per claim. The settings hold for the claim alone.
		tx.queue(`SET LOCAL enable_bitmapscan = off`)
		tx.queue(`SET LOCAL enable_sort = off`)
		from := map[string]store.Status{}
		if len(limits) == 0 {
			var err error
			if claimed, err = s.claimReady(ctx, tx, owner, agents, limit, at, expires, from); err != nil {
				return err
			}
		} else {
			floor, ok, err := claimFloor(ctx, tx, at)
			if err != nil || !ok {
				return err // the spend guard holds every task
			}
			if claimed, err = claimLimited(ctx, tx, owner, agents, limit, limits, floor, at, expires, from); err != nil {
				return err
			}
		}
		tx.queue(`RESET enable_bitmapscan`)
		tx.queue(`RESET enable_sort`)
		// RETURNING gives no order; callers expect claim order.
		slices.SortFunc(claimed, store.ClaimOrder)
		if err := store.AppendStarted(ctx, execTx{s, tx}, claimed, from, owner, at); err != nil {
			return err
		}
		if len(claimed) > 0 {
			// Only a claim that took work is a crash point, as on SQLite:
			// a daemon's first, empty claim must not end it before it serves.
			crashpoint.Hit(crashpoint.Claim)
		}
		return nil
	})
	return claimed, err
}

// claimReady claims up to limit ready tasks with sqlClaim, recording in
// from the status each is claimed from. Its floor comes from the cached
// spend guard while the stored one is unchanged; a claim under the cache
// that finds nothing reads the guard, and claims again if it had changed.
func (s *Store) claimReady(ctx context.Context, tx *txn, owner string, agents []string, limit int, at, expires time.Time, from map[string]store.Status) ([]*store.Task, error) {
	claim := func(floor int64, text *guardText) ([]*store.Task, error) {
		var limits, state *string
		if text != nil {
			limits, state = &text.limits, &text.state
		}
		rows, err := tx.Query(ctx, sqlClaim, at, agents, limit, floor, owner, expires, limits, state)
		if err != nil {
			return nil, err
		}
		return collect(rows, func(r pgx.Row) (*store.Task, error) {
			var st store.Status
			t, err := scanTask(prefixScanner{r, &st})
			if err == nil {
				from[t.ID] = st
			}
			return t, err
		})
	}
	floor, text, cached, ok, err := s.claimGuard(ctx, tx, at, false)
	if err != nil {
		return nil, err
	}
	var claimed []*store.Task
	if ok {
		var checked *guardText
		if cached {
			checked = &text
		}
		if claimed, err = claim(floor, checked); err != nil {
			return nil, err
		}
	}
	if len(claimed) > 0 || !cached {
		return claimed, nil
	}
	// The cache may be stale: an empty queue, or a guard that changed.
	was := text
	if floor, text, _, ok, err = s.claimGuard(ctx, tx, at, true); err != nil || !ok || text == was {
		return nil, err // nothing ready, or the spend guard holds every task
	}
	return claim(floor, nil)
}

// claimLimited claims as sqlClaim does, held to concurrency limits (see
// store.FillRoom), under an advisory lock that serializes such claims
// across every daemon, so two never count the same room.
func claimLimited(ctx context.Context, tx *txn, owner string, agents []string, limit int, limits map[string]int, floor int64, at, expires time.Time, from map[string]store.Status) ([]*store.Task, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(limitsLock)); err != nil {
		return nil, err
	}
	room, err := claimRoom(ctx, tx, limits)
	if err != nil {
		return nil, err
	}
	ids, err := store.FillRoom(room, limit, func(fullKeys, fullAgents []string, taken []string, want int, visit func(string, string, string)) error {
		rows, err := tx.Query(ctx, sqlSelectReadyLimited, at, agents, want, floor, fullKeys, fullAgents, append([]string{}, taken...))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var st store.Status
			var key *string
			var agent string
			if err := rows.Scan(&id, &st, &key, &agent); err != nil {
				return err
			}
			from[id] = st
			visit(id, deref(key), agent)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, sqlClaimIDs, at, ids, owner, expires)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r pgx.Row) (*store.Task, error) { return scanTask(r) })
}

// claimRoom counts, for each limited key, the tasks running under it.
func claimRoom(ctx context.Context, tx *txn, limits map[string]int) (*store.Room, error) {
	room := store.NewRoom(limits)
	keys, agents := room.Keys()
	count := func(query string, names []string, add func(string, int)) error {
		if len(names) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, query, names)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var n int
			if err := rows.Scan(&name, &n); err != nil {
				return err
			}
			add(name, n)
		}
		return rows.Err()
	}
	err := count(`SELECT concurrency_key, count(*) FROM tasks
		WHERE concurrency_key = ANY($1::text[]) AND status = 'running' GROUP BY 1`, keys, room.RunningKey)
	if err == nil {
		err = count(`SELECT agent, count(*) FROM tasks
			WHERE status = 'running' AND agent = ANY($1::text[]) GROUP BY 1`, agents, room.RunningAgent)
	}
	return room, err
}

// laneConflict reports a claim that would have run a second task of a
// lane.
func laneConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == laneIndex
}

// prefixScanner scans a leading column before the task columns.
type prefixScanner struct {
	row   pgx.Row
	first any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.row.Scan(append([]any{p.first}, dest...)...)
}

// sqlRenew renews every lease still held in one statement; a lease
// missing from what it returns is lost. It locks them in id order, as a
// finish batch does, so the two never wait on each other in a cycle.
const sqlRenew = `WITH held AS (
		SELECT t.id FROM tasks t JOIN unnest($2::text[], $3::bigint[]) AS l(id, token)
			ON t.id = l.id AND t.lease_token = l.token
		WHERE t.status = 'running'
		ORDER BY t.id FOR UPDATE OF t
	)
	UPDATE tasks SET lease_expires_at = $1
	FROM held WHERE tasks.id = held.id
	RETURNING tasks.id, tasks.lease_token, tasks.cancel_requested_at IS NOT NULL, tasks.pause_requested_at IS NOT NULL`

// LeaseRenewMany implements store.Store.
func (s *Store) LeaseRenewMany(ctx context.Context, p *store.LeaseRenewManyParams) ([]store.LeaseRenewResult, error) {
	at := s.now(p.Now)
	expires := at.Add(p.TTL)
	ids := make([]string, len(p.Leases))
	tokens := make([]int64, len(p.Leases))
	for i, l := range p.Leases {
		ids[i], tokens[i] = l.TaskID, l.Token
	}
	type renewed struct{ cancel, pause bool }
	held := map[store.Lease]renewed{}
	err := s.writeTx(ctx, func(tx *txn) error {
		clear(held)
		if len(ids) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, sqlRenew, expires, ids, tokens)
		if err != nil {
			return err
		}
		var (
			l store.Lease
			r renewed
		)
		_, err = pgx.ForEachRow(rows, []any{&l.TaskID, &l.Token, &r.cancel, &r.pause}, func() error {
			held[l] = r
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	results := make([]store.LeaseRenewResult, len(p.Leases))
	for i, l := range p.Leases {
		r, ok := held[l]
		if !ok || l.Token == 0 {
			results[i] = store.LeaseRenewResult{TaskID: l.TaskID, Err: store.ErrLeaseLost}
			continue
		}
		results[i] = store.LeaseRenewResult{TaskID: l.TaskID, ExpiresAt: expires, CancelRequested: r.cancel, PauseRequested: r.pause}
	}
	return results, nil
}

var _ store.LeaseRecoverer = execTx{}

// ExpiredLeases implements store.LeaseRecoverer. The rows are locked, in
// id order, and read as they are once locked: a lease renewed or finished
// meanwhile is left alone.
func (x execTx) ExpiredLeases(ctx context.Context, owners []string, at time.Time) ([]store.ExpiredLease, error) {
	rows, err := x.tx.Query(ctx, `SELECT id, attempt, max_attempts, cancel_requested_at IS NOT NULL, coalesce(cancel_reason, ''),
			coalesce(lease_expires_at >= $1, false)
		FROM tasks WHERE status = 'running'
		  AND (lease_expires_at < $1 OR lease_owner = ANY($2))
		ORDER BY id FOR UPDATE`, at, append([]string{}, owners...))
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r pgx.Row) (store.ExpiredLease, error) {
		var e store.ExpiredLease
		err := r.Scan(&e.TaskID, &e.Attempt, &e.MaxAttempts, &e.CancelRequested, &e.CancelReason, &e.OwnerGone)
		return e, err
	})
}

// RecoverLease implements store.LeaseRecoverer.
func (x execTx) RecoverLease(ctx context.Context, e store.ExpiredLease, plan store.RecoverPlan, at time.Time) (*store.Task, error) {
	var errCode, errMessage *string
	var finished *time.Time
	if plan.Error != nil {
		errCode, errMessage = nullString(plan.Error.Code), nullString(plan.Error.Message)
	}
	if plan.To.Terminal() {
		finished = toNull(at)
	}
	return scanTask(x.tx.QueryRow(ctx, `UPDATE tasks SET
		status = $1, lease_token = lease_token + 1, lease_owner = NULL, lease_expires_at = NULL, spend_reserved = 0,
		error_code = $2, error_message = $3, finished_at = $4, updated_at = $5,
		run_at = CASE WHEN $1 = 'pending' THEN run_at ELSE $5 END
		WHERE id = $6 AND status = 'running' RETURNING `+taskColumns,
		plan.To, errCode, errMessage, finished, at, e.TaskID))
}

// LeaseOwnerList implements store.Store.
func (s *Store) LeaseOwnerList(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT lease_owner FROM tasks WHERE status = 'running' AND lease_owner IS NOT NULL ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list lease owners: %w", err)
	}
	owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list lease owners: %w", err)
	}
	return owners, nil
}

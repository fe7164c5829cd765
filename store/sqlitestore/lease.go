package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/crashpoint"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

// claimable is where a claim may come from, straight from the transition
// table; the tasks_ready index is declared over the same list.
var claimable = sqlval.StatusList(store.SourcesOf(store.StatusRunning))

var (
	// A task in a lane is ready only when no task of its lane runs and no
	// ready task of its lane comes before it: each lane offers its head.
	// Claims go by priority, then turn (pass, see passFor), run_at and id.
	// There is no LIMIT: the caller reads as many rows as it wants. A bound
	// LIMIT whose value changes makes SQLite prepare the statement again on
	// every run, and the index gives the order without a sort, so rows
	// past the last one read are never looked at.
	sqlSelectReady = selectReady("", "rowid, status")

	// sqlSelectReadyLimited also leaves out the tasks of keys with no room
	// left (?4: concurrency keys, ?5: agents) and those already taken (?6:
	// rowids), and returns each task's keys.
	sqlSelectReadyLimited = selectReady(`
		  AND (concurrency_key IS NULL OR concurrency_key NOT IN (SELECT value FROM json_each(?4)))
		  AND agent NOT IN (SELECT value FROM json_each(?5))
		  AND rowid NOT IN (SELECT value FROM json_each(?6))`, "rowid, status, concurrency_key, agent")

	// A claim clears what earlier attempts reserved of the budget and never
	// released: those attempts are over.
	// The unary + keeps the planner from walking every ready task through
	// an index on status; the rowids lead straight to the rows.
	// The claimed rows are read back by sqlClaimed rather than returned:
	// SQLite copies each RETURNING row into a temporary table before the
	// first is handed out, which cost more than reading the hot rows again.
	sqlClaim = `UPDATE tasks SET
		status = 'running', lease_owner = ?1, lease_expires_at = ?2,
		lease_token = lease_token + 1, attempt = attempt + 1 - attempt_open, attempt_open = 0, reserved = NULL, spend_reserved = 0,
		started_at = coalesce(started_at, ?3), updated_at = ?3
		WHERE rowid IN (SELECT value FROM json_each(?4)) AND +status IN (` + claimable + `)`

	sqlClaimed = `SELECT rowid, ` + taskColumns + ` FROM tasks WHERE rowid IN (SELECT value FROM json_each(?1))`

	sqlRenew = `UPDATE tasks SET lease_expires_at = ?1
		WHERE id = ?2 AND lease_token = ?3 AND status = 'running'
		RETURNING cancel_requested_at, pause_requested_at`
)

// selectReady is the ready-task query with more conditions, returning
// columns.
func selectReady(more, columns string) string {
	return `SELECT ` + columns + ` FROM tasks INDEXED BY tasks_ready
		WHERE status IN (` + claimable + `) AND run_at <= ?1
		  AND (?2 IS NULL OR agent IN (SELECT value FROM json_each(?2)))
		  AND (lane IS NULL OR (
		    NOT EXISTS (SELECT 1 FROM tasks r INDEXED BY tasks_lane_running
		      WHERE r.lane = tasks.lane AND r.status = 'running')
		    AND NOT EXISTS (SELECT 1 FROM tasks e INDEXED BY tasks_lane_order
		      WHERE e.lane = tasks.lane AND e.status IN (` + claimable + `) AND e.run_at <= ?1
		        AND (e.priority > tasks.priority OR e.priority = tasks.priority
		          AND (e.run_at < tasks.run_at OR e.run_at = tasks.run_at AND e.id < tasks.id)))))
		  AND priority >= ?3` + more + `
		ORDER BY priority DESC, pass, run_at, id`
}

// TaskLeaseMany implements store.Store.
func (s *Store) TaskLeaseMany(ctx context.Context, p *store.TaskLeaseManyParams) ([]*store.Task, error) {
	if p.Limit < 1 {
		return nil, nil
	}
	at := now(p.Now)
	expires := at.Add(p.TTL)
	var agents sql.NullString
	if p.Agents != nil {
		agents = sql.NullString{String: sqlval.MarshalList(p.Agents), Valid: true}
	}

	var claimed []*store.Task
	err := s.write(ctx, claimWrite, func(tx *sql.Tx) error {
		ctx := uncancelled(ctx)
		claimed = claimed[:0]
		floor, ok, err := s.claimFloor(ctx, tx, at)
		if err != nil || !ok {
			return err // the spend guard holds every task
		}
		var rowids []int64
		from := map[int64]store.Status{}
		if len(p.Limits) == 0 {
			rowids, err = s.selectReady(ctx, tx, at, agents, p.Limit, floor, from)
		} else {
			rowids, err = s.selectReadyLimited(ctx, tx, at, agents, p.Limit, floor, p.Limits, from)
		}
		if err != nil || len(rowids) == 0 {
			return err
		}

		ids := marshalRowids(rowids)
		res, err := tx.StmtContext(ctx, s.stmts.claim).ExecContext(ctx, p.Owner, micros(expires), micros(at), ids)
		if err != nil {
			return err
		}
		// The write turn kept the ready tasks as read; if one changed all
		// the same, reading the rows back would hand out a task not claimed.
		if n, err := res.RowsAffected(); err != nil || n != int64(len(rowids)) {
			return fmt.Errorf("claimed %d of %d ready tasks: %v", n, len(rowids), err)
		}
		rows, err := tx.StmtContext(ctx, s.stmts.claimed).QueryContext(ctx, ids)
		if err != nil {
			return err
		}
		claimedFrom := map[string]store.Status{}
		for rows.Next() {
			var rowid int64
			t, err := scanTask(prefixScanner{rows, &rowid})
			if err != nil {
				rows.Close()
				return err
			}
			claimedFrom[t.ID] = from[rowid]
			claimed = append(claimed, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		err = s.batchJournal(ctx, tx, func() error {
			return store.AppendStarted(ctx, execTx{s, tx}, claimed, claimedFrom, p.Owner, at)
		})
		if err != nil {
			return err
		}
		crashpoint.Hit(crashpoint.Claim)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lease tasks: %w", err)
	}
	// The rows come back in rowid order; callers expect claim order.
	slices.SortFunc(claimed, store.ClaimOrder)
	return claimed, nil
}

// selectReady lists up to limit ready tasks in claim order, recording the
// status each is claimed from.
func (s *Store) selectReady(ctx context.Context, tx *sql.Tx, at time.Time, agents sql.NullString, limit int, floor int64, from map[int64]store.Status) ([]int64, error) {
	rows, err := tx.StmtContext(ctx, s.stmts.selectReady).QueryContext(ctx, micros(at), agents, floor)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rowids []int64
	for len(rowids) < limit && rows.Next() {
		var rowid int64
		var st store.Status
		if err := rows.Scan(&rowid, &st); err != nil {
			return nil, err
		}
		rowids = append(rowids, rowid)
		from[rowid] = st
	}
	return rowids, rows.Err()
}

// selectReadyLimited is selectReady held to concurrency limits (see
// store.FillRoom). The write transaction serializes claims: the counts
// cannot change underneath.
func (s *Store) selectReadyLimited(ctx context.Context, tx *sql.Tx, at time.Time, agents sql.NullString, limit int, floor int64, limits map[string]int, from map[int64]store.Status) ([]int64, error) {
	room, err := claimRoom(ctx, tx, limits)
	if err != nil {
		return nil, err
	}
	return store.FillRoom(room, limit, func(fullKeys, fullAgents []string, taken []int64, want int, visit func(int64, string, string)) error {
		rows, err := tx.StmtContext(ctx, s.stmts.selectReadyLimited).QueryContext(ctx, micros(at), agents, floor,
			sqlval.MarshalList(fullKeys), sqlval.MarshalList(fullAgents), marshalRowids(taken))
		if err != nil {
			return err
		}
		defer rows.Close()
		for n := 0; n < want && rows.Next(); n++ {
			var rowid int64
			var st store.Status
			var key sql.NullString
			var agent string
			if err := rows.Scan(&rowid, &st, &key, &agent); err != nil {
				return err
			}
			from[rowid] = st
			visit(rowid, key.String, agent)
		}
		return rows.Err()
	})
}

// claimRoom counts, for each limited key, the tasks running under it.
func claimRoom(ctx context.Context, tx *sql.Tx, limits map[string]int) (*store.Room, error) {
	room := store.NewRoom(limits)
	keys, agents := room.Keys()
	count := func(query string, names []string, add func(string, int)) error {
		if len(names) == 0 {
			return nil
		}
		rows, err := tx.QueryContext(ctx, query, sqlval.MarshalList(names))
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
	err := count(`SELECT concurrency_key, count(*) FROM tasks INDEXED BY tasks_key_running
		WHERE concurrency_key IN (SELECT value FROM json_each(?1)) AND status = 'running' GROUP BY 1`, keys, room.RunningKey)
	if err == nil {
		err = count(`SELECT agent, count(*) FROM tasks INDEXED BY tasks_status
			WHERE status = 'running' AND agent IN (SELECT value FROM json_each(?1)) GROUP BY 1`, agents, room.RunningAgent)
	}
	return room, err
}

func marshalRowids(rowids []int64) string {
	ids := make([]string, len(rowids))
	for i, r := range rowids {
		ids[i] = fmt.Sprint(r)
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// prefixScanner scans a leading rowid column before the task columns.
type prefixScanner struct {
	rows  *sql.Rows
	rowid *int64
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.rows.Scan(append([]any{p.rowid}, dest...)...)
}

// LeaseRenewMany implements store.Store.
func (s *Store) LeaseRenewMany(ctx context.Context, p *store.LeaseRenewManyParams) ([]store.LeaseRenewResult, error) {
	at := now(p.Now)
	expires := at.Add(p.TTL)
	results := make([]store.LeaseRenewResult, len(p.Leases))
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		stmt := tx.StmtContext(ctx, s.stmts.renew)
		for i, l := range p.Leases {
			var cancelReq, pauseReq sql.NullInt64
			err := stmt.QueryRowContext(ctx, micros(expires), l.TaskID, l.Token).Scan(&cancelReq, &pauseReq)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				results[i] = store.LeaseRenewResult{TaskID: l.TaskID, Err: store.ErrLeaseLost}
			case err != nil:
				return err
			default:
				results[i] = store.LeaseRenewResult{TaskID: l.TaskID, ExpiresAt: expires, CancelRequested: cancelReq.Valid, PauseRequested: pauseReq.Valid}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return results, nil
}

var _ store.LeaseRecoverer = execTx{}

// ExpiredLeases implements store.LeaseRecoverer.
func (x execTx) ExpiredLeases(ctx context.Context, owners []string, at time.Time) ([]store.ExpiredLease, error) {
	rows, err := x.tx.QueryContext(ctx, `SELECT id, attempt, max_attempts, cancel_requested_at IS NOT NULL, coalesce(cancel_reason, ''),
			coalesce(lease_expires_at >= ?1, 0)
		FROM tasks WHERE status = 'running'
		  AND (lease_expires_at < ?1 OR lease_owner IN (SELECT value FROM json_each(?2)))`,
		micros(at), sqlval.MarshalList(owners))
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r rowScanner) (store.ExpiredLease, error) {
		var e store.ExpiredLease
		err := r.Scan(&e.TaskID, &e.Attempt, &e.MaxAttempts, &e.CancelRequested, &e.CancelReason, &e.OwnerGone)
		return e, err
	})
}

// RecoverLease implements store.LeaseRecoverer.
func (x execTx) RecoverLease(ctx context.Context, e store.ExpiredLease, plan store.RecoverPlan, at time.Time) (*store.Task, error) {
	var errCode, errMessage sql.NullString
	var finished sql.NullInt64
	if plan.Error != nil {
		errCode, errMessage = nullString(plan.Error.Code), nullString(plan.Error.Message)
	}
	if plan.To.Terminal() {
		finished = toNullMicros(at)
	}
	return scanTask(x.tx.QueryRowContext(ctx, `UPDATE tasks SET
		status = ?1, lease_token = lease_token + 1, lease_owner = NULL, lease_expires_at = NULL, spend_reserved = 0,
		error_code = ?2, error_message = ?3, finished_at = ?4, updated_at = ?5,
		run_at = CASE WHEN ?1 = 'pending' THEN run_at ELSE ?5 END
		WHERE id = ?6 AND status = 'running' RETURNING `+taskColumns,
		plan.To, errCode, errMessage, finished, micros(at), e.TaskID))
}

// LeaseOwnerList implements store.Store.
func (s *Store) LeaseOwnerList(ctx context.Context) ([]string, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT DISTINCT lease_owner FROM tasks WHERE status = 'running' AND lease_owner IS NOT NULL ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list lease owners: %w", err)
	}
	defer rows.Close()
	var owners []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, fmt.Errorf("list lease owners: %w", err)
		}
		owners = append(owners, o)
	}
	return owners, rows.Err()
}

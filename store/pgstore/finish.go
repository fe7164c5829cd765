package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

const (
	// sqlFinish ends the leases of a batch in one statement, a row of
	// arrays per task; paused_from is set only for a task that pauses.
	// The finish locked each row and found it running under the lease
	// first (finishStates), so the token alone fences here; a status
	// condition would also invite the planner to tasks_lease_expiry (see
	// finishPlan).
	sqlFinish = `UPDATE tasks SET
		status = f.status, result = f.result::json, error_code = f.error_code, error_message = f.error_message,
		run_at = coalesce(f.run_at, tasks.run_at), checkpoint = coalesce(f.checkpoint::json, tasks.checkpoint),
		attempt_open = f.released, lease_owner = NULL, lease_expires_at = NULL, spend_reserved = 0,
		finished_at = f.finished_at, updated_at = f.updated_at,
		paused_from = coalesce(f.paused_from, tasks.paused_from),
		pause_requested_at = CASE WHEN f.paused_from IS NULL THEN tasks.pause_requested_at END
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
			$8::text[], $9::int[], $10::timestamptz[], $11::timestamptz[], $12::text[])
			AS f(id, token, status, result, error_code, error_message, run_at,
			checkpoint, released, finished_at, updated_at, paused_from)
		WHERE tasks.id = f.id AND tasks.lease_token = f.token`

	sqlCheckpoint = `UPDATE tasks SET checkpoint = $1, updated_at = $2
		WHERE id = $3 AND lease_token = $4 AND status = 'running'`

	sqlProgress = `UPDATE tasks SET progress = $1, updated_at = $2
		WHERE id = $3 AND lease_token = $4 AND status = 'running'`
)

// TaskFinishMany implements store.Store.
func (s *Store) TaskFinishMany(ctx context.Context, params []*store.TaskFinishParams) ([]error, error) {
	results := make([]error, len(params))
	ids := make([]string, 0, len(params))
	for _, p := range params {
		ids = append(ids, p.Lease.TaskID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	err := s.writeTx(ctx, func(tx *txn) error {
		// The batch's tasks are locked up front, in id order, so two
		// batches over the same tasks queue rather than deadlock; what
		// the finishes decide from is read with the locks.
		states, err := finishStates(ctx, tx, ids)
		if err != nil {
			return err
		}
		ends := &leaseEnds{}
		tx.held = append(tx.held, ends)
		return store.FinishEach(ctx, params, results, s.now, func(p *store.TaskFinishParams) store.TaskFinisher {
			return finishTx{execTx{s, tx}, ends, states[p.Lease.TaskID]}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("finish tasks: %w", err)
	}
	return results, nil
}

// leaseEnds gathers a batch's lease ends for sqlFinish; the rows go out
// as one statement just before the transaction's next one, so whatever
// follows reads them written.
type leaseEnds struct {
	ids                                         []string
	tokens                                      []int64
	statuses                                    []string
	results, errCodes, errMessages, checkpoints []*string
	runAts, finished                            []*time.Time
	released                                    []int32
	ats                                         []time.Time
	pausedFrom                                  []*string
}

func (e *leaseEnds) add(lease store.Lease, to store.Status, result, errCode, errMessage *string, runAt *time.Time,
	checkpoint *string, released int, finished *time.Time, at time.Time, pausedFrom *string) {
	e.ids, e.tokens, e.statuses = append(e.ids, lease.TaskID), append(e.tokens, lease.Token), append(e.statuses, string(to))
	e.results, e.errCodes, e.errMessages = append(e.results, result), append(e.errCodes, errCode), append(e.errMessages, errMessage)
	e.runAts, e.checkpoints, e.released = append(e.runAts, runAt), append(e.checkpoints, checkpoint), append(e.released, int32(released))
	e.finished, e.ats, e.pausedFrom = append(e.finished, finished), append(e.ats, at.UTC()), append(e.pausedFrom, pausedFrom)
}

// finishPlan holds sqlFinish to one plan: for each row of the batch, its
// task by primary key. Statistics lag a queue that churns (a new
// database's first burst, or between autovacuums); from stale ones the
// planner would rather hash the batch against a scan of the table, or of
// every running task through tasks_lease_expiry, whose index keeps every
// task that ever ran until vacuum: in a 16-worker drain a finish of a
// dozen tasks took 1-2 ms that way, twice what it takes by key. The
// settings hold for sqlFinish alone.
var finishPlan = [...]string{`enable_hashjoin`, `enable_mergejoin`, `enable_bitmapscan`, `enable_seqscan`}

// take implements heldWrite.
func (e *leaseEnds) take() []*pgx.QueuedQuery {
	if len(e.ids) == 0 {
		return nil
	}
	qs := make([]*pgx.QueuedQuery, 0, 2*len(finishPlan)+1)
	for _, setting := range finishPlan {
		qs = append(qs, &pgx.QueuedQuery{SQL: `SET LOCAL ` + setting + ` = off`})
	}
	qs = append(qs, &pgx.QueuedQuery{SQL: sqlFinish, Arguments: []any{e.ids, e.tokens, e.statuses, e.results, e.errCodes,
		e.errMessages, e.runAts, e.checkpoints, e.released, e.finished, e.ats, e.pausedFrom}})
	for _, setting := range finishPlan {
		qs = append(qs, &pgx.QueuedQuery{SQL: `RESET ` + setting})
	}
	*e = leaseEnds{}
	return qs
}

// finishState is a finishing task's lease, and whether its end has a
// parent or dependents to tell.
type finishState struct {
	store.LeaseState
	hasParent, hasDependents bool
}

// finishStates locks ids, in id order, and reads their finish states.
// Whether a task has dependents is read by a second statement, sent with
// the first: a dependent inserted while the lock was awaited is seen only
// by a snapshot taken after it. A child's dependents are looked for only
// once its parent is locked (see ended), so for a child it is left true.
func finishStates(ctx context.Context, tx *txn, ids []string) (map[string]*finishState, error) {
	br, err := tx.send(ctx,
		&pgx.QueuedQuery{SQL: `SELECT id, status, lease_token, attempt, cancel_requested_at IS NOT NULL,
			coalesce(cancel_reason, ''), pause_requested_at IS NOT NULL, parent_id IS NOT NULL,
			` + sqlInboxTarget + `
			FROM tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE`, Arguments: []any{ids}},
		&pgx.QueuedQuery{SQL: `SELECT DISTINCT depends_on_id FROM task_dependencies
			WHERE depends_on_id = ANY($1) AND kind = 'blocks'`, Arguments: []any{ids}})
	if err != nil {
		return nil, err
	}
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	states := make(map[string]*finishState, len(ids))
	var (
		id string
		st finishState
		it inboxTarget
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &st.Status, &st.Token, &st.Attempt, &st.CancelRequested,
		&st.CancelReason, &st.PauseRequested, &st.hasParent, &it.topLevel, &it.session, &it.title, &it.route}, func() error {
		states[id] = &finishState{LeaseState: st.LeaseState, hasParent: st.hasParent, hasDependents: st.hasParent}
		tx.knowTarget(id, it) // the finish events' notifications need no second read
		return nil
	})
	if err != nil {
		return nil, err
	}
	if rows, err = br.Query(); err != nil {
		return nil, err
	}
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		if st := states[id]; st != nil {
			st.hasDependents = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return states, br.Close()
}

// finishTx is one finish of a batch: its task's state, read and locked
// up front (nil: no such task), and updated for a later entry of the
// batch; its lease end joins the batch's.
type finishTx struct {
	execTx
	ends  *leaseEnds
	state *finishState
}

var _ store.TaskFinisher = finishTx{}

// LeaseState implements store.TaskFinisher.
func (x finishTx) LeaseState(context.Context, string) (store.LeaseState, error) {
	if x.state == nil {
		return store.LeaseState{}, store.ErrNotFound
	}
	return x.state.LeaseState, nil
}

// OpenChildren implements store.TaskFinisher and store.TaskGraph. For a
// finish the task is locked, and a child that ends locks its parent
// before it looks at it: a child ending now either counts as ended or
// finds the task waiting.
func (x execTx) OpenChildren(ctx context.Context, id string) (int, error) {
	return x.s.openChildren(ctx, x.tx, id)
}

// Escalate implements store.TaskFinisher.
func (x finishTx) Escalate(ctx context.Context, p *store.EscalationParams) (json.RawMessage, []*store.TaskInsertParams, []store.EventAppend, error) {
	return x.s.escalate(ctx, x.tx, p)
}

// InsertInputRequest implements store.TaskFinisher.
func (x finishTx) InsertInputRequest(ctx context.Context, id string, ask *store.InputAsk, at time.Time) error {
	_, err := x.tx.Exec(ctx, `INSERT INTO input_requests (id, task_id, question, context, status, created_at, expires_at, default_answer, step_no)
		VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8)`, ask.ID, id, ask.Question, nullJSON(ask.Context), at,
		toNull(ask.ExpiresAt), ask.DefaultAnswer, sqlval.NullPositive(ask.StepNo))
	return err
}

// WriteFinish implements store.TaskFinisher: the lease end joins the
// batch's statement. The row is locked and its token checked: the update
// cannot miss.
func (x finishTx) WriteFinish(_ context.Context, p *store.TaskFinishParams, plan *store.FinishPlan, at time.Time) error {
	var (
		errCode, errMessage *string
		finished            *time.Time
		pausedFrom          *string
	)
	if plan.Error != nil {
		errCode, errMessage = nullString(plan.Error.Code), nullString(plan.Error.Message)
	}
	if plan.Finished {
		finished = toNull(at)
	}
	if plan.To == store.StatusPaused {
		pausedFrom = nullString(string(plan.Effective))
	}
	x.ends.add(p.Lease, plan.To, nullJSON(plan.Result), errCode, errMessage, toNull(plan.RunAt), nullJSON(p.Checkpoint),
		plan.Released, finished, at, pausedFrom)
	x.state.Status = plan.To
	return nil
}

// InsertFollowUp implements store.TaskFinisher.
func (x finishTx) InsertFollowUp(ctx context.Context, f *store.TaskInsertParams) error {
	_, err := x.s.insertTask(ctx, x.tx, f)
	return err
}

// RelateFollowUp implements store.TaskFinisher.
func (x finishTx) RelateFollowUp(ctx context.Context, followUpID, taskID string) error {
	_, err := x.tx.Exec(ctx, `INSERT INTO task_dependencies (task_id, depends_on_id, kind) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, followUpID, taskID, store.DependencyRelated)
	return err
}

// InsertMemory implements store.TaskFinisher.
func (x finishTx) InsertMemory(ctx context.Context, m *store.MemoryInsertParams, at time.Time) error {
	_, _, err := x.s.insertMemory(ctx, x.tx, m, at)
	return err
}

// TaskEnded implements store.TaskFinisher: whether the task has a parent
// or dependents to tell was read with its lock.
func (x finishTx) TaskEnded(ctx context.Context, id string, at time.Time) error {
	return x.s.endedAs(ctx, x.tx, id, at, x.state.hasParent, x.state.hasDependents)
}

var _ store.LeaseWriter = execTx{}

// WriteCheckpoint implements store.LeaseWriter.
func (x execTx) WriteCheckpoint(ctx context.Context, lease store.Lease, checkpoint json.RawMessage, at time.Time) (bool, error) {
	tag, err := x.tx.Exec(ctx, sqlCheckpoint, nullJSON(checkpoint), at, lease.TaskID, lease.Token)
	return err == nil && tag.RowsAffected() == 1, err
}

// WriteProgress implements store.LeaseWriter.
func (x execTx) WriteProgress(ctx context.Context, lease store.Lease, progress []byte, at time.Time) (bool, error) {
	tag, err := x.tx.Exec(ctx, sqlProgress, string(progress), at, lease.TaskID, lease.Token)
	return err == nil && tag.RowsAffected() == 1, err
}

var (
	_ store.TaskCanceller = execTx{}
	_ store.TaskRetrier   = execTx{}
)

// RequestCancel implements store.TaskCanceller.
func (x execTx) RequestCancel(ctx context.Context, id, reason string, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET cancel_requested_at = $1, cancel_reason = $2, updated_at = $1 WHERE id = $3`,
		at, reason, id)
	return err
}

// SetCancelled implements store.TaskCanceller.
func (x execTx) SetCancelled(ctx context.Context, id, reason string, taskErr *store.TaskError, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET status = 'cancelled', error_code = $1, error_message = $2,
		cancel_requested_at = $3, cancel_reason = $4, finished_at = $3, updated_at = $3 WHERE id = $5`,
		taskErr.Code, taskErr.Message, at, reason, id)
	return err
}

// EachOpenDescendant implements store.TaskCanceller. The tree is walked a
// level at a time, each level read after f locked its parents: a child
// inserted meanwhile (insertTask locks its parent) is either seen here or
// finds its parent cancelled.
func (x execTx) EachOpenDescendant(ctx context.Context, id string, f func(id string) error) error {
	level := []string{id}
	for len(level) > 0 {
		rows, err := x.tx.Query(ctx, `SELECT id, status IN ('completed', 'failed', 'cancelled') FROM tasks
			WHERE parent_id = ANY($1) ORDER BY id`, level)
		if err != nil {
			return err
		}
		type child struct {
			id    string
			ended bool
		}
		var c child
		var children []child
		if _, err := pgx.ForEachRow(rows, []any{&c.id, &c.ended}, func() error {
			children = append(children, c)
			return nil
		}); err != nil {
			return err
		}
		level = level[:0]
		for _, c := range children {
			if !c.ended {
				if err := f(c.id); err != nil {
					return err
				}
			}
			level = append(level, c.id)
		}
	}
	return nil
}

// ResetForRetry implements store.TaskRetrier.
func (x execTx) ResetForRetry(ctx context.Context, id string, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET status = 'pending', result = NULL, error_code = NULL, error_message = NULL,
		cancel_requested_at = NULL, cancel_reason = NULL, finished_at = NULL,
		attempt_open = 0, max_attempts = greatest(max_attempts, attempt + 1), run_at = $1, updated_at = $1 WHERE id = $2`, at, id)
	return err
}

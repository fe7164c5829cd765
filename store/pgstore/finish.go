package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

const (
	// sqlFinish ends the leases of a batch in one statement, a row of
	// arrays per task; paused_from is set only for a task that pauses.
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
		WHERE tasks.id = f.id AND tasks.lease_token = f.token AND tasks.status = 'running'`

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
		for i, p := range params {
			err := s.finishOne(ctx, tx, ends, p, states[p.Lease.TaskID])
			if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrIllegalTransition) {
				results[i] = err
				continue
			}
			if err != nil {
				return err
			}
			results[i] = nil
		}
		return nil
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

// take implements heldWrite.
func (e *leaseEnds) take() *pgx.QueuedQuery {
	if len(e.ids) == 0 {
		return nil
	}
	q := &pgx.QueuedQuery{SQL: sqlFinish, Arguments: []any{e.ids, e.tokens, e.statuses, e.results, e.errCodes,
		e.errMessages, e.runAts, e.checkpoints, e.released, e.finished, e.ats, e.pausedFrom}}
	*e = leaseEnds{}
	return q
}

// finishState is a finishing task's lease, and whether its end has a
// parent or dependents to tell.
type finishState struct {
	leaseState
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
	_, err = pgx.ForEachRow(rows, []any{&id, &st.status, &st.token, &st.attempt, &st.cancelRequested,
		&st.cancelReason, &st.pauseRequested, &st.hasParent, &it.topLevel, &it.session, &it.title, &it.route}, func() error {
		states[id] = &finishState{leaseState: st.leaseState, hasParent: st.hasParent, hasDependents: st.hasParent}
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

// finishOne ends one lease; ls is the task's state, locked (nil: no such
// task), and is updated for a later entry of the batch.
func (s *Store) finishOne(ctx context.Context, tx *txn, ends *leaseEnds, p *store.TaskFinishParams, ls *finishState) error {
	at := s.now(p.Now)
	if ls == nil {
		return store.ErrNotFound
	}
	// The task is locked, and a child that ends locks its parent before it
	// looks at it: a child ending now either counts as ended or finds the
	// task waiting.
	plan, err := store.PlanFinish(p, store.FinishLease{Status: ls.status, Token: ls.token,
		CancelRequested: ls.cancelRequested, CancelReason: ls.cancelReason, PauseRequested: ls.pauseRequested},
		at, func() (int, error) { return s.openChildren(ctx, tx, p.Lease.TaskID) })
	if err != nil || plan.Done {
		return err
	}
	followUps, events := p.FollowUps, p.Events
	if plan.To == store.StatusCompleted && p.Escalation != nil {
		res, made, evs, err := s.escalate(ctx, tx, p.Escalation)
		if err != nil {
			return fmt.Errorf("escalations: %w", err)
		}
		plan.Result, followUps, events = res, append(slices.Clip(followUps), made...), append(slices.Clip(events), evs...)
	}
	to, effective, taskErr, result, released := plan.To, plan.Effective, plan.Error, plan.Result, plan.Released
	var (
		errCode, errMessage *string
		finished            *time.Time
	)
	if taskErr != nil {
		errCode, errMessage = nullString(taskErr.Code), nullString(taskErr.Message)
	}
	runAt := toNull(plan.RunAt)
	if plan.Finished {
		finished = toNull(at)
	}
	if effective == store.StatusInputRequired {
		_, err := tx.Exec(ctx, `INSERT INTO input_requests (id, task_id, question, context, status, created_at, expires_at, default_answer)
			VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7)`, p.Ask.ID, p.Lease.TaskID, p.Ask.Question, nullJSON(p.Ask.Context), at,
			toNull(p.Ask.ExpiresAt), p.Ask.DefaultAnswer)
		if err != nil {
			return err
		}
	}
	// The row is locked and its token checked: the update cannot miss.
	var pausedFrom *string
	if to == store.StatusPaused {
		pausedFrom = nullString(string(effective))
	}
	ends.add(p.Lease, to, nullJSON(result), errCode, errMessage, runAt, nullJSON(p.Checkpoint),
		released, finished, at, pausedFrom)
	ls.status = to
	data := &store.TransitionData{From: store.StatusRunning, To: to, Attempt: ls.attempt, Error: taskErr, Result: result}
	if effective == store.StatusInputRequired {
		data.RequestID, data.Question = p.Ask.ID, p.Ask.Question
	}
	if runAt != nil && to == store.StatusRetryScheduled {
		t := fromDB(*runAt)
		data.RunAt = &t
	}
	if err := tx.appendEvent(p.Lease.TaskID, store.TransitionEventType(store.StatusRunning, to), p.Actor, data, at); err != nil {
		return err
	}
	if to == store.StatusCompleted {
		for _, f := range followUps {
			if _, err := s.insertTask(ctx, tx, f); err != nil {
				// Not %w: a follow-up that cannot be written fails the whole
				// batch rather than passing as this entry's own outcome.
				return fmt.Errorf("follow-up task %s: %v", f.ID, err)
			}
			// The follow-up refers to what it follows: retention keeps
			// the one while the other is open.
			if _, err := tx.Exec(ctx, `INSERT INTO task_dependencies (task_id, depends_on_id, kind) VALUES ($1, $2, $3)
				ON CONFLICT DO NOTHING`, f.ID, p.Lease.TaskID, store.DependencyRelated); err != nil {
				return err
			}
		}
		for _, ev := range events {
			if err := tx.appendEvent(ev.TaskID, ev.Type, ev.Actor, ev.Data, at); err != nil {
				return err
			}
		}
		for _, m := range p.Memories {
			if _, _, err := s.insertMemory(ctx, tx, m, at); err != nil {
				// Not %w, as for a follow-up: the whole batch fails.
				return fmt.Errorf("memory %s: %v", m.ID, err)
			}
		}
	}
	if to.Terminal() {
		return s.endedAs(ctx, tx, p.Lease.TaskID, at, ls.hasParent, ls.hasDependents)
	}
	return nil
}

// leaseWrite runs one token-checked UPDATE and tells a stale lease from an
// unknown task. The UPDATE's own WHERE is the check, so it needs no lock
// taken before.
func (s *Store) leaseWrite(ctx context.Context, tx *txn, sql, id string, args ...any) error {
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if _, err := s.leaseState(ctx, tx, id); err != nil {
		return err
	}
	return store.ErrLeaseLost
}

// TaskCheckpoint implements store.Store.
func (s *Store) TaskCheckpoint(ctx context.Context, p *store.TaskCheckpointParams) error {
	at := s.now(p.Now)
	err := s.writeTx(ctx, func(tx *txn) error {
		return s.leaseWrite(ctx, tx, sqlCheckpoint, p.Lease.TaskID,
			nullJSON(p.Checkpoint), at, p.Lease.TaskID, p.Lease.Token)
	})
	if err != nil {
		return fmt.Errorf("checkpoint task %s: %w", p.Lease.TaskID, err)
	}
	return nil
}

// TaskProgress implements store.Store.
func (s *Store) TaskProgress(ctx context.Context, p *store.TaskProgressParams) error {
	at := s.now(p.Now)
	b, err := json.Marshal(p.Progress)
	if err != nil {
		return fmt.Errorf("progress task %s: %w", p.Lease.TaskID, err)
	}
	err = s.writeTx(ctx, func(tx *txn) error {
		err := s.leaseWrite(ctx, tx, sqlProgress, p.Lease.TaskID, string(b), at, p.Lease.TaskID, p.Lease.Token)
		if err != nil {
			return err
		}
		return tx.appendEvent(p.Lease.TaskID, store.EventTaskProgress, p.Actor, p.Progress, at)
	})
	if err != nil {
		return fmt.Errorf("progress task %s: %w", p.Lease.TaskID, err)
	}
	return nil
}

// TaskCancel implements store.Store. It cancels the task's unfinished
// descendants too, in the same transaction.
func (s *Store) TaskCancel(ctx context.Context, p *store.TaskCancelParams) (*store.Task, error) {
	at := s.now(p.Now)
	var t *store.Task
	err := s.writeTx(ctx, func(tx *txn) error {
		if err := s.cancelTree(ctx, tx, p.ID, p.Reason, p.Actor, at); err != nil {
			return err
		}
		var err error
		t, err = getTask(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel task %s: %w", p.ID, err)
	}
	return t, nil
}

// cancelTree cancels a task that has not ended and every unfinished task
// below it. The tree is walked a level at a time, each level read after
// its parents are locked: a child inserted meanwhile (insertTask locks its
// parent) is either seen here or finds its parent cancelled.
func (s *Store) cancelTree(ctx context.Context, tx *txn, id, reason, actor string, at time.Time) error {
	if err := s.cancelOne(ctx, tx, id, reason, actor, at, true); err != nil {
		return err
	}
	below := "an ancestor was cancelled"
	if reason != "" {
		below += ": " + reason
	}
	level := []string{id}
	for len(level) > 0 {
		rows, err := tx.Query(ctx, `SELECT id, status IN ('completed', 'failed', 'cancelled') FROM tasks
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
				if err := s.cancelOne(ctx, tx, c.id, below, actor, at, false); err != nil {
					return err
				}
			}
			level = append(level, c.id)
		}
	}
	return nil
}

// cancelOne cancels one task: a running one is asked to stop (its worker
// ends it), another unfinished one is cancelled. A finished one is an
// error when strict, else left alone (it may have ended meanwhile). The
// task stays locked until the transaction ends.
func (s *Store) cancelOne(ctx context.Context, tx *txn, id, reason, actor string, at time.Time, strict bool) error {
	ls, err := s.leaseState(ctx, tx, id)
	if err != nil {
		return err
	}
	switch {
	case ls.status == store.StatusRunning:
		if ls.cancelRequested {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE tasks SET cancel_requested_at = $1, cancel_reason = $2, updated_at = $1 WHERE id = $3`,
			at, reason, id)
		if err != nil {
			return err
		}
		return tx.appendEvent(id, store.EventTaskCancelRequested, actor,
			&store.TransitionData{From: store.StatusRunning, To: store.StatusRunning, Attempt: ls.attempt, Reason: reason}, at)
	case ls.status.Terminal() && !strict:
		return nil
	}
	if err := store.CheckAction(store.ActionCancel, id, ls.status, store.StatusCancelled); err != nil {
		return err
	}
	taskErr := store.CancelError(reason)
	_, err = tx.Exec(ctx, `UPDATE tasks SET status = 'cancelled', error_code = $1, error_message = $2,
		cancel_requested_at = $3, cancel_reason = $4, finished_at = $3, updated_at = $3 WHERE id = $5`,
		taskErr.Code, taskErr.Message, at, reason, id)
	if err != nil {
		return err
	}
	err = tx.appendEvent(id, store.EventTaskCancelled, actor,
		&store.TransitionData{From: ls.status, To: store.StatusCancelled, Attempt: ls.attempt, Error: taskErr, Reason: reason}, at)
	if err != nil {
		return err
	}
	return s.ended(ctx, tx, id, at)
}

// TaskRetry implements store.Store.
func (s *Store) TaskRetry(ctx context.Context, p *store.TaskRetryParams) (*store.Task, error) {
	at := s.now(p.Now)
	var t *store.Task
	err := s.writeTx(ctx, func(tx *txn) error {
		ls, err := s.leaseState(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		// Operator retry is the way out of failed only, though the table
		// allows pending from other states for other reasons.
		if ls.status != store.StatusFailed {
			return &store.TransitionError{TaskID: p.ID, From: ls.status, To: store.StatusPending, Action: store.ActionRetry}
		}
		// The attempt count goes on; a task out of attempts gets one more.
		_, err = tx.Exec(ctx, `UPDATE tasks SET status = 'pending', result = NULL, error_code = NULL, error_message = NULL,
			cancel_requested_at = NULL, cancel_reason = NULL, finished_at = NULL,
			attempt_open = 0, max_attempts = greatest(max_attempts, attempt + 1), run_at = $1, updated_at = $1 WHERE id = $2`, at, p.ID)
		if err != nil {
			return err
		}
		err = tx.appendEvent(p.ID, store.EventTaskRetried, p.Actor,
			&store.TransitionData{From: store.StatusFailed, To: store.StatusPending, Attempt: ls.attempt}, at)
		if err != nil {
			return err
		}
		t, err = getTask(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry task %s: %w", p.ID, err)
	}
	return t, nil
}

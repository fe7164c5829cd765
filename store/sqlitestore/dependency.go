package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

const (
	sqlDependents = `SELECT d.task_id FROM task_dependencies d JOIN tasks t ON t.id = d.task_id
		WHERE d.depends_on_id = ? AND d.kind = 'blocks' AND t.status = 'blocked'`
	sqlParentOf = `SELECT parent_id FROM tasks WHERE id = ?`
	// sqlCloseInputs closes the questions an ended task left open.
	sqlCloseInputs = `UPDATE input_requests SET status = '` + store.InputCancelled + `'
		WHERE task_id = ? AND status = '` + store.InputPending + `'`
)

// graphTx is a write transaction seen as the task graph (store.TaskGraph)
// and the pause of tasks (store.TaskPauser).
type graphTx struct{ execTx }

var _ store.DependencyAdder = graphTx{}

// settle settles a task that has just become blocked (see store.Settle).
func (s *Store) settle(ctx context.Context, tx *sql.Tx, taskID string, at time.Time) error {
	return store.Settle(ctx, s.graph(tx), taskID, at)
}

// ended does what the end of taskID sets off (see store.Ended), inside the
// transaction that ended it.
func (s *Store) ended(ctx context.Context, tx *sql.Tx, taskID string, at time.Time) error {
	return store.Ended(ctx, s.graph(tx), taskID, at)
}

func (s *Store) graph(tx *sql.Tx) graphTx { return graphTx{execTx{s: s, tx: tx}} }

// Graph implements store.WriteTx.
func (x execTx) Graph() store.GraphTx { return graphTx{x} }

// openChildren counts a task's children that have not ended.
func (s *Store) openChildren(ctx context.Context, tx *sql.Tx, parentID string) (int, error) {
	var open int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks
		WHERE parent_id = ? AND status NOT IN ('completed', 'failed', 'cancelled')`, parentID).Scan(&open)
	return open, err
}

func (x graphTx) SettleState(ctx context.Context, taskID string, _ bool) (*store.SettleState, error) {
	var st store.SettleState
	err := x.tx.QueryRowContext(ctx, `SELECT status, on_dependency_failure, attempt FROM tasks WHERE id = ?`, taskID).
		Scan(&st.Status, &st.OnDependencyFailure, &st.Attempt)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

func (x graphTx) SettleBlockers(ctx context.Context, taskID string, _ *store.SettleState, _ bool) (store.Blockers, error) {
	var b store.Blockers
	var brokenBy sql.NullString
	err := x.tx.QueryRowContext(ctx, `SELECT
			count(*) FILTER (WHERE b.status NOT IN ('completed', 'failed', 'cancelled')),
			count(*) FILTER (WHERE b.status IN ('failed', 'cancelled')),
			min(CASE WHEN b.status IN ('failed', 'cancelled') THEN b.id END)
		FROM task_dependencies d JOIN tasks b ON b.id = d.depends_on_id
		WHERE d.task_id = ? AND d.kind = 'blocks'`, taskID).Scan(&b.Open, &b.Broken, &brokenBy)
	b.BrokenBy = brokenBy.String
	return b, err
}

func (x graphTx) FailBlocked(ctx context.Context, taskID string, e *store.TaskError, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET status = 'failed', error_code = ?1, error_message = ?2,
		finished_at = ?3, updated_at = ?3 WHERE id = ?4`, e.Code, e.Message, micros(at), taskID)
	return err
}

func (x graphTx) Unblock(ctx context.Context, taskID string, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET status = 'pending', run_at = max(run_at, ?1), updated_at = ?1
		WHERE id = ?2`, micros(at), taskID)
	return err
}

func (x graphTx) CloseInputs(ctx context.Context, taskID string) error {
	_, err := x.tx.StmtContext(ctx, x.s.stmts.closeInputs).ExecContext(ctx, taskID)
	return err
}

func (x graphTx) EndedParent(ctx context.Context, taskID string) (string, error) {
	var parentID sql.NullString
	err := x.tx.StmtContext(ctx, x.s.stmts.parentOf).QueryRowContext(ctx, taskID).Scan(&parentID)
	return parentID.String, err
}

func (x graphTx) BlockedDependents(ctx context.Context, taskID string) ([]string, error) {
	rows, err := x.tx.StmtContext(ctx, x.s.stmts.dependents).QueryContext(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r rowScanner) (string, error) {
		var id string
		err := r.Scan(&id)
		return id, err
	})
}

func (x graphTx) WaitingState(ctx context.Context, parentID string) (store.Status, int, error) {
	var status store.Status
	var attempt int
	err := x.tx.QueryRowContext(ctx, `SELECT status, attempt FROM tasks WHERE id = ?`, parentID).Scan(&status, &attempt)
	return status, attempt, err
}

func (x graphTx) SubtasksDone(ctx context.Context, parentID string, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET status = 'pending', run_at = ?1, updated_at = ?1 WHERE id = ?2`,
		micros(at), parentID)
	return err
}

func (x graphTx) EdgeEnds(ctx context.Context, taskID, dependsOnID string) (taskFound, blockerFound bool, err error) {
	exists := func(id string) (bool, error) {
		var n int
		err := x.tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE id = ?`, id).Scan(&n)
		return n > 0, err
	}
	if taskFound, err = exists(taskID); err != nil || !taskFound {
		return taskFound, false, err
	}
	blockerFound, err = exists(dependsOnID)
	return taskFound, blockerFound, err
}

func (x graphTx) DependsOn(ctx context.Context, from, to string) (bool, error) {
	var reach int
	err := x.tx.QueryRowContext(ctx, `WITH RECURSIVE reach(id) AS (
			SELECT depends_on_id FROM task_dependencies WHERE task_id = ?1
			UNION
			SELECT d.depends_on_id FROM task_dependencies d JOIN reach ON d.task_id = reach.id
		) SELECT count(*) FROM reach WHERE id = ?2`, from, to).Scan(&reach)
	return reach > 0, err
}

func (x graphTx) InsertDependency(ctx context.Context, taskID, dependsOnID, kind string) (bool, error) {
	res, err := x.tx.ExecContext(ctx, `INSERT OR IGNORE INTO task_dependencies (task_id, depends_on_id, kind) VALUES (?, ?, ?)`,
		taskID, dependsOnID, kind)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func (x graphTx) AddBlocker(ctx context.Context, taskID, dependsOnID string, at time.Time) (store.Status, int, error) {
	if _, err := x.tx.ExecContext(ctx, `UPDATE tasks SET depends_on = json_insert(depends_on, '$[#]', ?1), updated_at = ?2 WHERE id = ?3`,
		dependsOnID, micros(at), taskID); err != nil {
		return "", 0, err
	}
	return x.WaitingState(ctx, taskID)
}

func (x graphTx) Block(ctx context.Context, taskID string) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET status = 'blocked' WHERE id = ?`, taskID)
	return err
}

// DependencyList implements store.Store.
func (s *Store) DependencyList(ctx context.Context, taskIDs []string) ([]*store.Dependency, error) {
	if len(taskIDs) == 0 {
		return nil, nil
	}
	deps, err := listDependencies(ctx, s.reader, marshalList(taskIDs))
	if err != nil {
		return nil, fmt.Errorf("list dependencies: %w", err)
	}
	return deps, nil
}

// DependentList implements store.Store.
func (s *Store) DependentList(ctx context.Context, taskIDs []string) ([]*store.Dependency, error) {
	if len(taskIDs) == 0 {
		return nil, nil
	}
	deps, err := queryEdges(ctx, s.reader, `SELECT task_id, depends_on_id, kind FROM task_dependencies INDEXED BY task_dependencies_blocker
		WHERE depends_on_id IN (SELECT value FROM json_each(?)) ORDER BY depends_on_id, task_id`, marshalList(taskIDs))
	if err != nil {
		return nil, fmt.Errorf("list dependents: %w", err)
	}
	return deps, nil
}

package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/errandhq/errand/store"
)

// finishedTask is the condition of the tasks_finished index, word for word
// so that the planner takes it; unfinished renders the open statuses.
var (
	finishedTask = `t.status = 'completed' OR t.status = 'failed' OR t.status = 'cancelled'`
	unfinished   = func() string {
		var open []store.Status
		for _, st := range store.AllStatuses {
			if !st.Terminal() {
				open = append(open, st)
			}
		}
		return statusList(open)
	}()
)

// sqlPurgeCandidates picks the oldest finished tasks nothing open refers to.
var sqlPurgeCandidates = `SELECT t.id FROM tasks t INDEXED BY tasks_finished
	WHERE (` + finishedTask + `) AND t.finished_at < ?1
	  AND NOT EXISTS (SELECT 1 FROM tasks p WHERE p.id = t.parent_id AND p.status IN (` + unfinished + `))
	  AND NOT EXISTS (SELECT 1 FROM tasks c INDEXED BY tasks_parent WHERE c.parent_id = t.id AND c.status IN (` + unfinished + `))
	  AND NOT EXISTS (SELECT 1 FROM task_dependencies d INDEXED BY task_dependencies_blocker JOIN tasks l ON l.id = d.task_id
	    WHERE d.depends_on_id = t.id AND l.status IN (` + unfinished + `))
	ORDER BY t.finished_at LIMIT ?2`

// purgeDeletes remove a batch's rows; ?1 is the JSON list of task ids.
var purgeDeletes = []string{
	`DELETE FROM task_steps WHERE task_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM task_events WHERE task_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM input_requests WHERE task_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM notifications WHERE task_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM task_dependencies WHERE task_id IN (SELECT value FROM json_each(?1))
		OR depends_on_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM task_tags WHERE task_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM a2a_push_configs WHERE task_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM tasks WHERE id IN (SELECT value FROM json_each(?1))`,
}

// TaskPurge implements store.Store.
func (s *Store) TaskPurge(ctx context.Context, p *store.TaskPurgeParams) (*store.TaskPurgeResult, error) {
	res := &store.TaskPurgeResult{}
	if p.Limit < 1 {
		return res, nil
	}
	run := func(q querier) error {
		rows, err := q.QueryContext(ctx, sqlPurgeCandidates, micros(p.FinishedBefore), p.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		res.TaskIDs = res.TaskIDs[:0]
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			res.TaskIDs = append(res.TaskIDs, id)
		}
		return rows.Err()
	}
	if p.DryRun {
		if err := run(s.reader); err != nil {
			return nil, fmt.Errorf("purge tasks: %w", err)
		}
		return res, nil
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res.Rows = 0
		if err := run(tx); err != nil || len(res.TaskIDs) == 0 {
			return err
		}
		ids := marshalList(res.TaskIDs)
		for _, q := range purgeDeletes {
			r, err := tx.ExecContext(ctx, q, ids)
			if err != nil {
				return err
			}
			n, _ := r.RowsAffected()
			res.Rows += n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	return res, nil
}

package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

// purgeable is what keeps a finished task t: nothing open refers to it.
const purgeable = `t.status IN ('completed', 'failed', 'cancelled') AND t.finished_at < $1
	AND NOT EXISTS (SELECT 1 FROM tasks p WHERE p.id = t.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled'))
	AND NOT EXISTS (SELECT 1 FROM tasks c WHERE c.parent_id = t.id AND c.status NOT IN ('completed', 'failed', 'cancelled'))
	AND NOT EXISTS (SELECT 1 FROM task_dependencies d JOIN tasks l ON l.id = d.task_id
		WHERE d.depends_on_id = t.id AND l.status NOT IN ('completed', 'failed', 'cancelled'))`

const (
	// sqlPurgeCandidates picks the oldest finished tasks nothing open
	// refers to.
	sqlPurgeCandidates = `SELECT t.id FROM tasks t WHERE ` + purgeable + ` ORDER BY t.finished_at, t.id LIMIT $2`
	// sqlPurgeLock locks them, skipping any another transaction holds (it
	// may be making a reference to it: the next purge looks again).
	sqlPurgeLock = sqlPurgeCandidates + ` FOR UPDATE OF t SKIP LOCKED`
	// sqlPurgeRecheck keeps, of the locked candidates $2, those still
	// purgeable now: a reference committed after the candidates were
	// picked (a child, a dependency, a follow-up's edge) is seen here, and
	// none can be made to a locked task until this transaction ends.
	sqlPurgeRecheck = `SELECT t.id FROM tasks t WHERE t.id = ANY($2) AND ` + purgeable + ` ORDER BY t.finished_at, t.id`
)

// purgeDeletes remove a batch's rows; $1 is the list of task ids.
var purgeDeletes = []string{
	`DELETE FROM task_steps WHERE task_id = ANY($1)`,
	`DELETE FROM task_events WHERE task_id = ANY($1)`,
	`DELETE FROM input_requests WHERE task_id = ANY($1)`,
	`DELETE FROM notifications WHERE task_id = ANY($1)`,
	`DELETE FROM task_dependencies WHERE task_id = ANY($1) OR depends_on_id = ANY($1)`,
	`DELETE FROM task_tags WHERE task_id = ANY($1)`,
	`DELETE FROM a2a_push_configs WHERE task_id = ANY($1)`,
	`DELETE FROM tasks WHERE id = ANY($1)`,
}

// TaskPurge implements store.Store.
func (s *Store) TaskPurge(ctx context.Context, p *store.TaskPurgeParams) (*store.TaskPurgeResult, error) {
	res := &store.TaskPurgeResult{}
	if p.Limit < 1 {
		return res, nil
	}
	before := p.FinishedBefore.UTC().Truncate(time.Microsecond)
	ids := func(q querier, sql string, arg any) ([]string, error) {
		rows, err := q.Query(ctx, sql, before, arg)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if p.DryRun {
		var err error
		if res.TaskIDs, err = ids(s.pool, sqlPurgeCandidates, p.Limit); err != nil {
			return nil, fmt.Errorf("purge tasks: %w", err)
		}
		return res, nil
	}
	err := s.writeTx(ctx, func(tx *txn) error {
		res.TaskIDs, res.Rows = nil, 0
		locked, err := ids(tx, sqlPurgeLock, p.Limit)
		if err != nil || len(locked) == 0 {
			return err
		}
		if res.TaskIDs, err = ids(tx, sqlPurgeRecheck, locked); err != nil || len(res.TaskIDs) == 0 {
			return err
		}
		for _, q := range purgeDeletes {
			tag, err := tx.Exec(ctx, q, res.TaskIDs)
			if err != nil {
				return err
			}
			res.Rows += tag.RowsAffected()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	return res, nil
}

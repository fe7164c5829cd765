-- The finished-task index, its condition written as comparisons. SQLite
-- evaluates an IN list of three or more values through a temporary table
-- built on the spot, and a partial index's condition is evaluated twice in
-- every write of a task's status (the row before and after): a claim and a
-- finish each built two such tables per task. The purge query names the
-- same condition, so the planner still takes the index.
DROP INDEX tasks_finished;
CREATE INDEX tasks_finished ON tasks (finished_at)
    WHERE status = 'completed' OR status = 'failed' OR status = 'cancelled';

ALTER TABLE input_requests DROP COLUMN step_no;
ALTER TABLE tasks DROP COLUMN agent_version;
ALTER TABLE task_steps DROP COLUMN copied_from;
DROP INDEX tasks_forked_from;
ALTER TABLE tasks DROP COLUMN forked_from_step;
ALTER TABLE tasks DROP COLUMN forked_from;

DROP INDEX tasks_finished;
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE status IN ('completed', 'failed', 'cancelled');

-- Retention: finished tasks are found by when they finished, and their
-- notifications by task, so a purge batch reads only what it removes.
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX notifications_task ON notifications (task_id);

DROP TABLE rate_buckets;
DROP TABLE agent_pauses;
DROP INDEX tasks_fair;
DROP INDEX tasks_ready;
CREATE INDEX tasks_ready ON tasks (priority DESC, run_at, id)
    WHERE status IN ('pending', 'retry_scheduled');
ALTER TABLE tasks DROP COLUMN pass;
ALTER TABLE tasks DROP COLUMN fair_key;
DROP INDEX tasks_key_running;
ALTER TABLE tasks DROP COLUMN concurrency_key;

-- Flow control. A task's concurrency key lives in its options, like its
-- lane; the column lets a claim count by index what runs under a key.
ALTER TABLE tasks ADD COLUMN concurrency_key text GENERATED ALWAYS AS (options ->> 'concurrency_key') STORED;
CREATE INDEX tasks_key_running ON tasks (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND status = 'running';

-- Fair claiming: claims rotate across fairness keys (the concurrency key,
-- else the session). A task's pass is its turn: set when it is written,
-- one past the last ready task of its key, and never before the front of
-- the queue, so a key with a long backlog takes turns with the others
-- rather than going first.
ALTER TABLE tasks ADD COLUMN fair_key text
    GENERATED ALWAYS AS (coalesce('k:' || (options ->> 'concurrency_key'), session_id)) STORED;
ALTER TABLE tasks ADD COLUMN pass bigint NOT NULL DEFAULT 0;

DROP INDEX tasks_ready;
CREATE INDEX tasks_ready ON tasks (priority DESC, pass, run_at, id)
    WHERE status IN ('pending', 'retry_scheduled');
CREATE INDEX tasks_fair ON tasks (fair_key, priority, pass)
    WHERE status IN ('pending', 'retry_scheduled');

-- Agents paused by an operator: their tasks stay pending.
CREATE TABLE agent_pauses (
    agent     text PRIMARY KEY,
    actor     text NOT NULL,
    paused_at timestamptz NOT NULL
);

-- Token buckets of provider rate limits, one per model, shared by every
-- daemon of the store; updated_at is when they were last refilled.
CREATE TABLE rate_buckets (
    model      text PRIMARY KEY,
    requests   double precision NOT NULL,
    tokens     double precision NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Flow control. A task's concurrency key lives in its options, like its
-- lane; the column lets a claim count by index what runs under a key.
ALTER TABLE tasks ADD COLUMN concurrency_key TEXT
    GENERATED ALWAYS AS (json_extract(options, '$.concurrency_key')) VIRTUAL;
CREATE INDEX tasks_key_running ON tasks (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND status = 'running';

-- Fair claiming: claims rotate across fairness keys (the concurrency key,
-- else the session). A task's pass is its turn: set when it is written,
-- one past the last ready task of its key, and never before the front of
-- the queue, so a key with a long backlog takes turns with the others
-- rather than going first.
ALTER TABLE tasks ADD COLUMN fair_key TEXT
    GENERATED ALWAYS AS (coalesce('k:' || json_extract(options, '$.concurrency_key'), session_id)) VIRTUAL;
ALTER TABLE tasks ADD COLUMN pass INTEGER NOT NULL DEFAULT 0;

DROP INDEX tasks_ready;
CREATE INDEX tasks_ready ON tasks (priority DESC, pass, run_at, id)
    WHERE status IN ('pending', 'retry_scheduled');
CREATE INDEX tasks_fair ON tasks (fair_key, priority, pass)
    WHERE status IN ('pending', 'retry_scheduled');

-- Agents paused by an operator: their tasks stay pending.
CREATE TABLE agent_pauses (
    agent     TEXT PRIMARY KEY,
    actor     TEXT NOT NULL,
    paused_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Token buckets of provider rate limits, one per model, shared by every
-- daemon of the store. Levels are in requests and tokens; updated_at is
-- when they were last refilled (microseconds).
CREATE TABLE rate_buckets (
    model      TEXT PRIMARY KEY,
    requests   REAL NOT NULL,
    tokens     REAL NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

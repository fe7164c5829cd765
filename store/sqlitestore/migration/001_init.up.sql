-- Times are Unix microseconds (UTC). JSON columns hold text.
CREATE TABLE tasks (
    id                  TEXT    NOT NULL UNIQUE,
    parent_id           TEXT,
    run_id              TEXT    NOT NULL,
    session_id          TEXT    NOT NULL DEFAULT '',
    agent               TEXT    NOT NULL,
    title               TEXT    NOT NULL DEFAULT '',
    goal                TEXT    NOT NULL,
    input               TEXT    NOT NULL DEFAULT '{}',
    metadata            TEXT    NOT NULL DEFAULT '{}',
    tags                TEXT    NOT NULL DEFAULT '[]',
    priority            INTEGER NOT NULL DEFAULT 5,
    status              TEXT    NOT NULL,
    progress            TEXT,
    result              TEXT,
    error_code          TEXT,
    error_message       TEXT,
    checkpoint          TEXT,
    attempt             INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL DEFAULT 5,
    run_at              INTEGER NOT NULL,
    lease_owner         TEXT,
    lease_expires_at    INTEGER,
    lease_token         INTEGER NOT NULL DEFAULT 0,
    cancel_requested_at INTEGER,
    cancel_reason       TEXT,
    depends_on          TEXT    NOT NULL DEFAULT '[]',
    idempotency_key     TEXT,
    budget              TEXT,
    consumed            TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    started_at          INTEGER,
    finished_at         INTEGER
);

-- Claim order, over ready tasks only: the partial index stays small however
-- many finished tasks the table holds.
CREATE INDEX tasks_ready ON tasks (priority DESC, run_at, id)
    WHERE status IN ('pending', 'retry_scheduled');

CREATE UNIQUE INDEX tasks_idempotency_key ON tasks (idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- List filters, each walked newest first; tasks_status also finds the
-- running tasks that recovery checks for expired leases.
CREATE INDEX tasks_status  ON tasks (status, id);
CREATE INDEX tasks_agent   ON tasks (agent, id);
CREATE INDEX tasks_run     ON tasks (run_id, id);
CREATE INDEX tasks_session ON tasks (session_id, id) WHERE session_id != '';
CREATE INDEX tasks_parent  ON tasks (parent_id, id) WHERE parent_id IS NOT NULL;

CREATE TABLE task_tags (
    tag     TEXT NOT NULL,
    task_id TEXT NOT NULL,
    PRIMARY KEY (tag, task_id)
) WITHOUT ROWID;

CREATE INDEX task_tags_task ON task_tags (task_id);

-- The durable journal. AUTOINCREMENT keeps ids increasing and never reused;
-- with one writer they increase in commit order, so a reader that asks for
-- id > last never misses an event.
CREATE TABLE task_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    TEXT    NOT NULL,
    type       TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    data       TEXT    NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL
);

CREATE INDEX task_events_task ON task_events (task_id, id);

-- One row per LLM call, tool call, subtask or human question of an agent.
CREATE TABLE task_steps (
    id              INTEGER PRIMARY KEY,
    task_id         TEXT    NOT NULL,
    step_no         INTEGER NOT NULL,
    call_index      INTEGER NOT NULL DEFAULT 0,
    type            TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    tool            TEXT,
    idempotency_key TEXT    NOT NULL UNIQUE,
    input           TEXT,
    output          TEXT,
    tokens_in       INTEGER NOT NULL DEFAULT 0,
    tokens_out      INTEGER NOT NULL DEFAULT 0,
    cost_usd        REAL    NOT NULL DEFAULT 0,
    duration_ms     INTEGER NOT NULL DEFAULT 0,
    error_code      TEXT,
    error_message   TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

CREATE INDEX task_steps_task ON task_steps (task_id, step_no, call_index);

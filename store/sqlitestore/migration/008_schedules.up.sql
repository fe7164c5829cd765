-- Schedules: work that starts by itself. A firing is claimed by moving
-- next_run_at (or, for event schedules, event_cursor) in the transaction
-- that inserts its task, so one firing makes one task however many
-- engines share the database.
CREATE TABLE schedules (
    id            TEXT    NOT NULL PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    kind          TEXT    NOT NULL,
    spec          TEXT    NOT NULL,
    timezone      TEXT    NOT NULL DEFAULT '',
    catch_up      TEXT    NOT NULL DEFAULT 'one',
    active_hours  TEXT    NOT NULL DEFAULT '',
    enabled       INTEGER NOT NULL DEFAULT 1,
    declared      INTEGER NOT NULL DEFAULT 0,
    task          TEXT    NOT NULL DEFAULT '{}',
    stuck_after   INTEGER NOT NULL DEFAULT 0,
    next_run_at   INTEGER,
    last_run_at   INTEGER,
    last_task_id  TEXT,
    fire_count    INTEGER NOT NULL DEFAULT 0,
    event_cursor  INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX schedules_due ON schedules (next_run_at) WHERE enabled = 1 AND next_run_at IS NOT NULL;

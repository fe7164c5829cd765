-- Session inboxes: one row per outcome (or open question) of a top-level
-- task, written in the transaction that appends its event.
CREATE TABLE notifications (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT    NOT NULL DEFAULT '',
    task_id    TEXT    NOT NULL,
    event_id   INTEGER NOT NULL,
    event_type TEXT    NOT NULL,
    text       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    read_at    INTEGER
);

CREATE INDEX notifications_session ON notifications (session_id, id);
CREATE INDEX notifications_unread ON notifications (session_id, id) WHERE read_at IS NULL;

-- Where each journal consumer (a webhook deliverer, say) has got to.
CREATE TABLE cursors (
    name       TEXT    NOT NULL PRIMARY KEY,
    event_id   INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Spend over a period (today, this month) sums the steps it started, from
-- the index alone.
CREATE INDEX task_steps_created ON task_steps (created_at, cost_usd);

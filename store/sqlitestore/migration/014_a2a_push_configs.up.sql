-- Where A2A clients asked to be told of a task's changes (push
-- notifications), per task; purged with the task.
CREATE TABLE a2a_push_configs (
    task_id          TEXT    NOT NULL,
    id               TEXT    NOT NULL,
    url              TEXT    NOT NULL,
    token            TEXT    NOT NULL DEFAULT '',
    auth_scheme      TEXT    NOT NULL DEFAULT '',
    auth_credentials TEXT    NOT NULL DEFAULT '',
    protocol_version TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (task_id, id)
) WITHOUT ROWID;

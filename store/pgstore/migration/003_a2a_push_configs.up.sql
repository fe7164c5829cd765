-- Where A2A clients asked to be told of a task's changes (push
-- notifications), per task; purged with the task.
CREATE TABLE a2a_push_configs (
    task_id          text        NOT NULL,
    id               text        COLLATE "C" NOT NULL,
    url              text        NOT NULL,
    token            text        NOT NULL DEFAULT '',
    auth_scheme      text        NOT NULL DEFAULT '',
    auth_credentials text        NOT NULL DEFAULT '',
    protocol_version text        NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (task_id, id)
);

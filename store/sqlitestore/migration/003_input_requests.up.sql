-- Questions an agent asked a person, and their answers.
CREATE TABLE input_requests (
    id          TEXT    NOT NULL PRIMARY KEY,
    task_id     TEXT    NOT NULL,
    question    TEXT    NOT NULL,
    context     TEXT,
    status      TEXT    NOT NULL, -- pending, answered, expired
    answer      TEXT,
    created_at  INTEGER NOT NULL,
    answered_at INTEGER
);

CREATE INDEX input_requests_status ON input_requests (status, id);
CREATE INDEX input_requests_task ON input_requests (task_id, id);

-- Memories: text agents keep across tasks, with its provenance. They
-- outlive the tasks that wrote them (a task purge leaves them), so
-- task_id is not a reference the database enforces.
CREATE TABLE memories (
    rid              INTEGER PRIMARY KEY,
    id               TEXT    NOT NULL UNIQUE,
    text             TEXT    NOT NULL,
    tags             TEXT    NOT NULL DEFAULT '[]',
    task_id          TEXT    NOT NULL DEFAULT '',
    agent            TEXT    NOT NULL DEFAULT '',
    source           TEXT    NOT NULL,
    estimated_tokens INTEGER NOT NULL,
    idempotency_key  TEXT,
    created_at       INTEGER NOT NULL
);

CREATE UNIQUE INDEX memories_idempotency_key ON memories (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Lists and purges by provenance, and retention by age.
CREATE INDEX memories_task    ON memories (task_id, id);
CREATE INDEX memories_agent   ON memories (agent, id);
CREATE INDEX memories_source  ON memories (source, id);
CREATE INDEX memories_created ON memories (created_at);

-- Full-text index over text and tags (a JSON list, whose words index
-- well), kept in step with the table by the triggers below. External
-- content: the text is stored once. Porter stemming lets "deployments"
-- find "deployment"; diacritics are folded ("cafe" finds "café").
CREATE VIRTUAL TABLE memories_fts USING fts5(
    text, tags,
    content = 'memories', content_rowid = 'rid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text, tags) VALUES (new.rid, new.text, new.tags);
END;

CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags) VALUES ('delete', old.rid, old.text, old.tags);
END;

CREATE TRIGGER memories_fts_update AFTER UPDATE OF text, tags ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags) VALUES ('delete', old.rid, old.text, old.tags);
    INSERT INTO memories_fts (rowid, text, tags) VALUES (new.rid, new.text, new.tags);
END;

-- Memory trust: what kind of thing a memory is (its category sets how fast
-- confidence in it decays) and what it is about (two memories with one
-- subject and different text disagree); the quarantine flag, a JSON
-- MemoryFlag, NULL when the memory is not flagged; the last refresh by a
-- task; and the vector for hybrid recall (little-endian float32s, NULL
-- when there is none).
ALTER TABLE memories
    ADD COLUMN category     text        NOT NULL DEFAULT 'fact',
    ADD COLUMN subject      text        NOT NULL DEFAULT '',
    ADD COLUMN flag         json,
    ADD COLUMN refreshed_at timestamptz,
    ADD COLUMN refreshed_by text        NOT NULL DEFAULT '',
    ADD COLUMN embedding    bytea;

-- The memory route keeps a task's result under the key <task id>:result.
UPDATE memories SET category = 'task_result' WHERE idempotency_key LIKE '%:result';

-- Flagged memories are few: listing them reads only them.
CREATE INDEX memories_flagged ON memories (id) WHERE flag IS NOT NULL;

-- Conflicts a recall found, each pair once: newer supersedes older.
CREATE TABLE memory_conflicts (
    newer_id   text        NOT NULL,
    older_id   text        NOT NULL,
    subject    text        NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (newer_id, older_id)
);

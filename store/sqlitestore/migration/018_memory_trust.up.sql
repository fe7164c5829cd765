-- Memory trust: what kind of thing a memory is (its category sets how fast
-- confidence in it decays) and what it is about (two memories with one
-- subject and different text disagree); the quarantine flag, a JSON
-- MemoryFlag, NULL when the memory is not flagged; the last refresh by a
-- task; and the vector for hybrid recall (little-endian float32s, NULL
-- when there is none).
ALTER TABLE memories ADD COLUMN category     TEXT    NOT NULL DEFAULT 'fact';
ALTER TABLE memories ADD COLUMN subject      TEXT    NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN flag         TEXT;
ALTER TABLE memories ADD COLUMN refreshed_at INTEGER;
ALTER TABLE memories ADD COLUMN refreshed_by TEXT    NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN embedding    BLOB;

-- The memory route keeps a task's result under the key <task id>:result.
UPDATE memories SET category = 'task_result' WHERE idempotency_key LIKE '%:result';

-- Flagged memories are few: listing them reads only them.
CREATE INDEX memories_flagged ON memories (id) WHERE flag IS NOT NULL;

-- Conflicts a recall found, each pair once: newer supersedes older.
CREATE TABLE memory_conflicts (
    newer_id   TEXT    NOT NULL,
    older_id   TEXT    NOT NULL,
    subject    TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (newer_id, older_id)
) WITHOUT ROWID;

-- Edges of the task graph: task_id depends on depends_on_id. Only kind
-- 'blocks' holds a task back; 'related' and 'discovered_from' are recorded.
CREATE TABLE task_dependencies (
    task_id       TEXT NOT NULL,
    depends_on_id TEXT NOT NULL,
    kind          TEXT NOT NULL DEFAULT 'blocks',
    PRIMARY KEY (task_id, depends_on_id)
) WITHOUT ROWID;

CREATE INDEX task_dependencies_blocker ON task_dependencies (depends_on_id, task_id);

-- What a dependent does when a blocker fails or is cancelled: fail (with
-- dependency_failed) or run anyway.
ALTER TABLE tasks ADD COLUMN on_dependency_failure TEXT NOT NULL DEFAULT 'fail';

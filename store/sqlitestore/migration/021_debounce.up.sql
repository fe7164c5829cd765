-- A debounced task carries its key; at most one task holding a key has
-- not started yet (pending, or paused before it started), and later
-- submits with the key update that one.
ALTER TABLE tasks ADD COLUMN debounce_key TEXT;
CREATE UNIQUE INDEX tasks_debounce_pending ON tasks (debounce_key)
	WHERE debounce_key IS NOT NULL AND status IN ('pending', 'paused') AND started_at IS NULL;

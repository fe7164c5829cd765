-- An operator hold: the status a paused task goes back to on resume, and
-- when a running task was asked to pause after its current step.
ALTER TABLE tasks ADD COLUMN paused_from TEXT;
ALTER TABLE tasks ADD COLUMN pause_requested_at INTEGER;

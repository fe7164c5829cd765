ALTER TABLE tasks DROP COLUMN pause_requested_at;
ALTER TABLE tasks DROP COLUMN paused_from;

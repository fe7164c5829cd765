-- A task whose paid step the spend guard refused waits, pending, with
-- spend_deferred set until a paid step of its own is reserved again:
-- errand budget counts them, and raising a limit wakes them.
ALTER TABLE tasks ADD COLUMN spend_deferred INTEGER NOT NULL DEFAULT 0;
CREATE INDEX tasks_spend_deferred ON tasks (id) WHERE spend_deferred = 1;

-- What a firing does while the schedule's previous task is not terminal:
-- skip, buffer_one, allow_all or cancel_previous.
ALTER TABLE schedules ADD COLUMN overlap TEXT NOT NULL DEFAULT 'skip';
-- Each firing of an event schedule carries its own event: they keep
-- making a task each.
UPDATE schedules SET overlap = 'allow_all' WHERE kind = 'event';

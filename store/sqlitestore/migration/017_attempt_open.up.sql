-- attempt is the number of the attempt a task is on or last ran. A finish
-- that only waits (for an answer, for subtasks) or hands the task back
-- leaves its attempt open (1): the next claim goes on with the same
-- attempt rather than starting another, so a wait never uses one up.
ALTER TABLE tasks ADD COLUMN attempt_open INTEGER NOT NULL DEFAULT 0;
-- Waiting tasks used to count their attempt as given back.
UPDATE tasks SET attempt = attempt + 1, attempt_open = 1
WHERE status IN ('input_required', 'waiting_subtasks')
   OR (status = 'paused' AND paused_from IN ('input_required', 'waiting_subtasks'));

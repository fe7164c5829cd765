UPDATE tasks SET attempt = attempt - 1 WHERE attempt_open = 1;
ALTER TABLE tasks DROP COLUMN attempt_open;

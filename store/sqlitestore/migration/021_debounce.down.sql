DROP INDEX tasks_debounce_pending;
ALTER TABLE tasks DROP COLUMN debounce_key;

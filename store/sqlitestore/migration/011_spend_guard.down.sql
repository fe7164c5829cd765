DROP INDEX tasks_spend_reserved;
ALTER TABLE tasks DROP COLUMN spend_reserved;
DROP TABLE spend_guard;
DROP TABLE spend;

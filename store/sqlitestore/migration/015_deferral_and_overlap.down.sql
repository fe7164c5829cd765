ALTER TABLE schedules DROP COLUMN overlap;
DROP INDEX tasks_spend_deferred;
ALTER TABLE tasks DROP COLUMN spend_deferred;

ALTER TABLE tasks DROP COLUMN options;
ALTER TABLE tasks DROP COLUMN budget_warned_at;
ALTER TABLE tasks DROP COLUMN reserved;

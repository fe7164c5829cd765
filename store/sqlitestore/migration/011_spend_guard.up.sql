-- The global spend guard. Spend is summed in 15-minute buckets (micros
-- since the epoch, UTC) as steps finish, so a day or month in any zone is
-- a range of buckets and purging tasks forgets none of it.
CREATE TABLE spend (
    bucket   INTEGER PRIMARY KEY,
    cost_usd REAL NOT NULL
);

INSERT INTO spend (bucket, cost_usd)
    SELECT updated_at - updated_at % 900000000, sum(cost_usd) FROM task_steps
    WHERE cost_usd > 0 AND status != 'running'
    GROUP BY 1;

-- One row: the settings (JSON SpendLimits), the ones the configuration
-- file last declared, and what the guard remembers of the current periods.
CREATE TABLE spend_guard (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    limits     TEXT    NOT NULL,
    declared   TEXT,
    state      TEXT    NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);

INSERT INTO spend_guard (id, limits) VALUES (1,
    '{"daily_usd":0,"monthly_usd":0,"alert_thresholds":[0.5,0.8,0.9],"on_limit":"pause-all","timezone":"UTC"}');

-- What a running task's steps hold reserved of the guard, apart from what
-- its subtasks hold, so the sum over running tasks counts each once.
ALTER TABLE tasks ADD COLUMN spend_reserved REAL NOT NULL DEFAULT 0;
CREATE INDEX tasks_spend_reserved ON tasks (spend_reserved) WHERE spend_reserved > 0;

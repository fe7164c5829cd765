-- Lanes: at most one running task per lane. The lane lives in the task's
-- options; this column reads it so the claim can find, by index, whether
-- a lane is busy and which of its ready tasks comes first.
ALTER TABLE tasks ADD COLUMN lane TEXT GENERATED ALWAYS AS (json_extract(options, '$.lane')) VIRTUAL;

CREATE INDEX tasks_lane_order ON tasks (lane, priority DESC, run_at, id) WHERE lane IS NOT NULL;
CREATE INDEX tasks_lane_running ON tasks (lane) WHERE lane IS NOT NULL AND status = 'running';

DROP INDEX tasks_lane_running;
DROP INDEX tasks_lane_order;
ALTER TABLE tasks DROP COLUMN lane;

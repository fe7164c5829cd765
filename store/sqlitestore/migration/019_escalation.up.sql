-- Where a heartbeat's escalations go ({"to", "max_per_day", "budget"};
-- NULL: nowhere), and how many it made on escalation_day (UTC,
-- "2006-01-02"): the daily cap is counted here, in the transaction that
-- completes the scout.
ALTER TABLE schedules ADD COLUMN escalation TEXT;
ALTER TABLE schedules ADD COLUMN escalation_day TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN escalation_count INTEGER NOT NULL DEFAULT 0;

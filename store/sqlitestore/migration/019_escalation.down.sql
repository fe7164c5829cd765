ALTER TABLE schedules DROP COLUMN escalation_count;
ALTER TABLE schedules DROP COLUMN escalation_day;
ALTER TABLE schedules DROP COLUMN escalation;

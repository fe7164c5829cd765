DROP TABLE memory_conflicts;
DROP INDEX memories_flagged;
ALTER TABLE memories DROP COLUMN embedding;
ALTER TABLE memories DROP COLUMN refreshed_by;
ALTER TABLE memories DROP COLUMN refreshed_at;
ALTER TABLE memories DROP COLUMN flag;
ALTER TABLE memories DROP COLUMN subject;
ALTER TABLE memories DROP COLUMN category;

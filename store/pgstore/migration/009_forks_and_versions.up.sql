-- A fork names the task and step it was forked from; the index lists a
-- task's forks. A copied step names the task it was copied from: its cost
-- was paid there and is not the fork's.
ALTER TABLE tasks ADD COLUMN forked_from text;
ALTER TABLE tasks ADD COLUMN forked_from_step integer;
CREATE INDEX tasks_forked_from ON tasks (forked_from, id) WHERE forked_from IS NOT NULL;
ALTER TABLE task_steps ADD COLUMN copied_from text;
-- The definition of the task's agent its recorded work was done under
-- ({"digest", "parts"}; NULL: none recorded yet).
ALTER TABLE tasks ADD COLUMN agent_version json;
-- The step whose question an input request is (NULL: not recorded): a
-- fork copies the questions of the steps it copies.
ALTER TABLE input_requests ADD COLUMN step_no integer;

-- What a task's agent has reserved of its budget and not yet spent, and
-- when it was warned of crossing 80% of a limit.
ALTER TABLE tasks ADD COLUMN reserved TEXT;
ALTER TABLE tasks ADD COLUMN budget_warned_at INTEGER;
-- Agent-facing options of a task: max_steps, tools, tools_deny, system_prompt.
ALTER TABLE tasks ADD COLUMN options TEXT;

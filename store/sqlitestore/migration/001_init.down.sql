DROP TABLE task_steps;
DROP TABLE task_events;
DROP TABLE task_tags;
DROP TABLE tasks;

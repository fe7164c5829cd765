DROP INDEX task_steps_created;
DROP TABLE cursors;
DROP TABLE notifications;

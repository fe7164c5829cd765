DROP INDEX notifications_task;
DROP INDEX tasks_finished;

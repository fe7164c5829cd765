ALTER TABLE tasks DROP COLUMN on_dependency_failure;
DROP TABLE task_dependencies;

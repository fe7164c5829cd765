DROP TABLE a2a_push_configs;

DROP TABLE prompt_overheads;

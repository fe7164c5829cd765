-- What llm agents learned of their prompts: under a digest of what every
-- first prompt of an agent shares (model, system prompt, tools), the least
-- input tokens a model server reported for it.
CREATE TABLE prompt_overheads (
    key        TEXT    NOT NULL PRIMARY KEY,
    agent      TEXT    NOT NULL,
    tokens     INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

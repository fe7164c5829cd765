-- What llm agents learned of their prompts: under a digest of what every
-- first prompt of an agent shares (model, system prompt, tools), the least
-- input tokens a model server reported for it.
CREATE TABLE prompt_overheads (
    key        text        NOT NULL PRIMARY KEY,
    agent      text        NOT NULL,
    tokens     bigint      NOT NULL,
    updated_at timestamptz NOT NULL
);

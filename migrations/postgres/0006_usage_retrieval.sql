-- Whether a reply used retrieval (PostgreSQL dialect of migrations/0006_usage_retrieval.sql):
-- the tool round of each call (0 = the first request) and how many automatic fragments were in
-- it. Never edit this file once it has landed.

ALTER TABLE llm_usage ADD COLUMN tool_round integer NOT NULL DEFAULT 0;
ALTER TABLE llm_usage ADD COLUMN fragments integer NOT NULL DEFAULT 0;
ALTER TABLE llm_usage ADD COLUMN tools_called text NOT NULL DEFAULT '';

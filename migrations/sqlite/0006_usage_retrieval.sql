-- Whether a reply used retrieval: the tool round of each call (0 = the first request) and how
-- many automatic fragments were in it, so the cost and latency of retrieval can be read from
-- the usage rows. Never edit this file once it has landed.

ALTER TABLE llm_usage ADD COLUMN tool_round INTEGER NOT NULL DEFAULT 0;
ALTER TABLE llm_usage ADD COLUMN fragments INTEGER NOT NULL DEFAULT 0;
ALTER TABLE llm_usage ADD COLUMN tools_called TEXT NOT NULL DEFAULT '';

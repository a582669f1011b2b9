-- Forget is final even across a crash: the delete records, in its own transaction, that the
-- bytes it left (old index segments, old pages in the WAL) still have to be purged. The store
-- resumes every pending purge at start-up and clears the record only once the index has been
-- merged and the WAL checkpointed completely (memory/store/base.py). Never edit this file once
-- it has landed.

CREATE TABLE pending_purges (
    id           INTEGER PRIMARY KEY,
    requested_at TEXT NOT NULL
);

-- The columns that point at a conversation, a turn or a summary, so that deleting one (a forget)
-- finds what refers to it by index: without them each deleted turn scanned the whole usage
-- table (its turn_id is SET NULL), and a forget held the store for seconds at 10^5 turns.
CREATE INDEX IF NOT EXISTS llm_usage_turn ON llm_usage (turn_id);
CREATE INDEX IF NOT EXISTS llm_usage_conversation ON llm_usage (conversation_id);
CREATE INDEX IF NOT EXISTS reply_sources_summary ON reply_sources (summary_id);
CREATE INDEX IF NOT EXISTS memory_rejections_conversation ON memory_rejections (conversation_id);
CREATE INDEX IF NOT EXISTS memory_rejections_owner ON memory_rejections (user_id, character_id);

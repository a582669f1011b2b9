-- "El Viaje" (issue 30): per user and character, the chronicle of their private thread, with
-- {cite:ID} codes of the turns it rests on; one row per pair, replaced whole by each new
-- chronicle (the old version is deleted, never kept). `journey_runs` says which ended
-- conversation was chronicled and how (done, rejected, empty, predates, imported), so that a
-- conversation is written into the journey once, and what was owed at a crash is found again.
-- Both hold user text or refer to it: a forget deletes their rows (memory/store/copy.py's
-- MEMORY_TABLES) and `db copy` carries them. Never edit this file once it has landed.

CREATE TABLE journeys (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id                INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id           TEXT NOT NULL,
    -- Paragraphs separated by one blank line, citations inline.
    text                   TEXT NOT NULL,
    cited_ids_json         TEXT NOT NULL,
    -- The newest conversation written into it.
    covers_conversation_id INTEGER,
    created_at             TEXT NOT NULL,
    UNIQUE (user_id, character_id)
);

CREATE TABLE journey_runs (
    conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    user_id         INTEGER NOT NULL,
    character_id    TEXT NOT NULL,
    status          TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX journey_runs_owner ON journey_runs (user_id, character_id);

-- The conversations that ended before journeys existed are not chronicled after the fact: an
-- upgrade must not call the model once for every old conversation.
INSERT INTO journey_runs (conversation_id, user_id, character_id, status, created_at)
SELECT id, user_id, character_id, 'predates', ended_at FROM conversations
WHERE ended_at IS NOT NULL;

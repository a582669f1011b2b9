-- Long-term profile: structured facts about the person, their history, and the outcome of each
-- conversation's extraction. Never edit this file once it has landed.

CREATE TABLE facts (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('semantic', 'emotional', 'episodic')),
    key          TEXT NOT NULL,
    value        TEXT NOT NULL,
    origin       TEXT NOT NULL CHECK (origin IN ('stated', 'inferred', 'imported')),
    scope        TEXT NOT NULL,
    evidence     TEXT NOT NULL,
    lifetime     TEXT NOT NULL,
    event_date   TEXT,
    created_at   TEXT NOT NULL,
    confirmed_at TEXT NOT NULL,
    expires_at   TEXT,
    status       TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'pending')),
    UNIQUE (user_id, character_id, scope, kind, key)
);
CREATE INDEX facts_owner ON facts (user_id, character_id, scope);

-- Superseded values: "vegetarian until 2026-03, then ...".
CREATE TABLE fact_history (
    id            INTEGER PRIMARY KEY,
    fact_id       INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    user_id       INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    value         TEXT NOT NULL,
    origin        TEXT NOT NULL,
    evidence      TEXT NOT NULL,
    valid_from    TEXT NOT NULL,
    superseded_at TEXT NOT NULL,
    reason        TEXT NOT NULL
);
CREATE INDEX fact_history_fact ON fact_history (fact_id, id);

-- Values refused at write (instructions addressed to the bot, bad shapes): counted, not stored.
CREATE TABLE memory_rejections (
    id              INTEGER PRIMARY KEY,
    user_id         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id    TEXT NOT NULL,
    conversation_id INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
    reason          TEXT NOT NULL,
    created_at      TEXT NOT NULL
);

-- pending (NULL), done, empty (no user turn), rejected (malformed output after the retries).
ALTER TABLE conversations ADD COLUMN extraction_status TEXT;

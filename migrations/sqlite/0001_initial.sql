-- Foundation: users, conversations (sessions), the immutable turn log, rolling summaries and
-- LLM usage. Never edit this file once it has landed: add a new numbered migration instead.

CREATE TABLE users (
    id               INTEGER PRIMARY KEY,
    platform         TEXT NOT NULL,
    platform_user_id TEXT NOT NULL,
    display_name     TEXT NOT NULL DEFAULT '',
    created_at       TEXT NOT NULL,
    UNIQUE (platform, platform_user_id)
);

-- One session of a user with a character in one scope ('dm' or 'group:<channel id>').
CREATE TABLE conversations (
    id               INTEGER PRIMARY KEY,
    user_id          INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id     TEXT NOT NULL,
    scope            TEXT NOT NULL,
    started_at       TEXT NOT NULL,
    last_activity_at TEXT NOT NULL,
    ended_at         TEXT,
    end_reason       TEXT,
    extracted_at     TEXT
);
CREATE INDEX conversations_thread ON conversations (user_id, character_id, scope, id);
CREATE INDEX conversations_pending ON conversations (ended_at, extracted_at);

-- AUTOINCREMENT so that an id is never reused after a deletion: ids are permanent citation codes.
CREATE TABLE turns (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id     INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    user_id             INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id        TEXT NOT NULL,
    scope               TEXT NOT NULL,
    role                TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    text                TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    platform_message_id TEXT
);
CREATE INDEX turns_thread ON turns (user_id, character_id, scope, id);
CREATE INDEX turns_conversation ON turns (conversation_id, id);

-- Every version of the rolling summary of a thread; the newest one is current.
CREATE TABLE summaries (
    id                   INTEGER PRIMARY KEY,
    user_id              INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id         TEXT NOT NULL,
    scope                TEXT NOT NULL,
    fields_json          TEXT NOT NULL,
    cited_ids_json       TEXT NOT NULL,
    covers_up_to_turn_id INTEGER NOT NULL,
    created_at           TEXT NOT NULL
);
CREATE INDEX summaries_thread ON summaries (user_id, character_id, scope, id);

CREATE TABLE llm_usage (
    id                 INTEGER PRIMARY KEY,
    user_id            INTEGER REFERENCES users(id) ON DELETE CASCADE,
    character_id       TEXT,
    conversation_id    INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
    turn_id            INTEGER REFERENCES turns(id) ON DELETE SET NULL,
    kind               TEXT NOT NULL,
    model              TEXT NOT NULL,
    ok                 INTEGER NOT NULL,
    error              TEXT,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    latency_ms         REAL NOT NULL DEFAULT 0,
    created_at         TEXT NOT NULL
);
CREATE INDEX llm_usage_user ON llm_usage (user_id, created_at);

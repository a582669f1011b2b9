-- The user's own memory controls: review mode, and what each reply was built from (/memoria
-- porque). Never edit this file once it has landed.

CREATE TABLE user_preferences (
    user_id     INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    review_mode INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE reply_sources (
    turn_id           INTEGER PRIMARY KEY REFERENCES turns(id) ON DELETE CASCADE,
    user_id           INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id      TEXT NOT NULL,
    fact_ids          TEXT NOT NULL,
    summary_id        INTEGER REFERENCES summaries(id) ON DELETE SET NULL,
    window_turn_ids   TEXT NOT NULL,
    fragment_turn_ids TEXT NOT NULL,
    created_at        TEXT NOT NULL
);
CREATE INDEX reply_sources_owner ON reply_sources (user_id, character_id, turn_id);

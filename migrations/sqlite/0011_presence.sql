-- A companion alive between messages (issue 17): the user's time zone, for the local date and
-- time in the prompt and for follow-ups at a sensible local hour. Never edit this file once it
-- has landed.

ALTER TABLE user_preferences ADD COLUMN timezone TEXT;

-- Follow-ups (opt-in, per user and character): whether they are on, when they were offered,
-- and each one sent (once per dated fact; its turn is the message the character wrote).
CREATE TABLE followup_settings (
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id TEXT NOT NULL,
    enabled      INTEGER NOT NULL DEFAULT 0,
    offered_at   TEXT,
    PRIMARY KEY (user_id, character_id)
);

CREATE TABLE followups (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id TEXT NOT NULL,
    fact_id      INTEGER NOT NULL UNIQUE,
    turn_id      INTEGER REFERENCES turns(id) ON DELETE SET NULL,
    sent_at      TEXT NOT NULL
);
CREATE INDEX followups_owner ON followups (user_id, character_id, id);

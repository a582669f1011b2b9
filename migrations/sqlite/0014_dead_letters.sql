-- Updates a platform process could not store in the inbox after a few tries (issue 28): kept
-- here, so that the next updates go on, and listed by `companion inbox dead-letters`. The
-- payload is the update as the platform sent it, as JSON text (ASCII, escapes kept: a U+0000
-- is the six characters \u0000 here); it holds user text, so a forget of the sender deletes
-- their rows (platform, platform_user_id), and `db copy` carries the table. The inbox itself
-- is PostgreSQL's (0012); the table exists on SQLite too so that both schemas stay the same.
-- Never edit this file once it has landed.

CREATE TABLE dead_letters (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    platform         TEXT NOT NULL,
    -- The platform's id of the update (NULL when it had none): one row per update, however
    -- often it is delivered again.
    update_key       TEXT,
    -- The sender, when the update names one.
    platform_user_id TEXT,
    payload          TEXT NOT NULL,
    error            TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    UNIQUE (platform, update_key)
);
CREATE INDEX dead_letters_user ON dead_letters (platform, platform_user_id);

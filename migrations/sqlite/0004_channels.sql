-- Which character a user talks to in each DM/channel, and channels an admin bound to one
-- character. Never edit this file once it has landed.

CREATE TABLE character_choices (
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    channel_key  TEXT NOT NULL,
    character_id TEXT NOT NULL,
    chosen_at    TEXT NOT NULL,
    PRIMARY KEY (user_id, channel_key)
);

CREATE TABLE channel_bindings (
    platform     TEXT NOT NULL,
    channel_id   TEXT NOT NULL,
    character_id TEXT NOT NULL,
    bound_by     TEXT NOT NULL,
    bound_at     TEXT NOT NULL,
    PRIMARY KEY (platform, channel_id)
);

-- Which character a user talks to in each DM/channel, and channels an admin bound to one
-- character (PostgreSQL dialect of migrations/0004_channels.sql). Never edit this file once it
-- has landed.

CREATE TABLE character_choices (
    user_id      bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    channel_key  text NOT NULL,
    character_id text NOT NULL,
    chosen_at    text NOT NULL,
    PRIMARY KEY (user_id, channel_key)
);

CREATE TABLE channel_bindings (
    platform     text NOT NULL,
    channel_id   text NOT NULL,
    character_id text NOT NULL,
    bound_by     text NOT NULL,
    bound_at     text NOT NULL,
    PRIMARY KEY (platform, channel_id)
);

CREATE TRIGGER character_choices_changed AFTER INSERT OR UPDATE OR DELETE ON character_choices
    FOR EACH STATEMENT EXECUTE FUNCTION companion_notify_change();
CREATE TRIGGER channel_bindings_changed AFTER INSERT OR UPDATE OR DELETE ON channel_bindings
    FOR EACH STATEMENT EXECUTE FUNCTION companion_notify_change();

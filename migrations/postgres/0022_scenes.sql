-- Scenes (issue 31): a group chat is one shared conversation with one or several characters
-- (PostgreSQL dialect of migrations/sqlite/0022_scenes.sql, which says how it is kept).
-- Never edit this file once it has landed.

ALTER TABLE turns ADD COLUMN speaker_id bigint REFERENCES users(id) ON DELETE CASCADE;
ALTER TABLE turns ADD COLUMN speaker_character text;
ALTER TABLE turns ADD COLUMN speaker_name text;
CREATE INDEX turns_speaker ON turns (speaker_id, character_id) WHERE speaker_id IS NOT NULL;

CREATE TABLE scene_members (
    platform     text NOT NULL,
    channel_id   text NOT NULL,
    character_id text NOT NULL,
    added_by     text NOT NULL,
    added_at     text NOT NULL,
    PRIMARY KEY (platform, channel_id, character_id)
);

CREATE TRIGGER scene_members_changed AFTER INSERT OR UPDATE OR DELETE ON scene_members
    FOR EACH STATEMENT EXECUTE FUNCTION companion_notify_change();

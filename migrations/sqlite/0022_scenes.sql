-- Scenes (issue 31): a group chat is one shared conversation with one or several characters.
-- Each character present keeps its own copy of what it witnessed, in a thread of its own
-- owned by the scene's row in `users` (platform_user_id "scene:<channel id>", scope
-- "scene:<platform>:<channel id>"): a character added later has no copy of what came before,
-- and its window, summary and search hold nothing it did not witness. A line's speaker is
-- kept on each copy: the person (`speaker_id`, their row; deleting it deletes their lines) or
-- another character (`speaker_character`), with the name shown (`speaker_name`). A
-- participant's forget deletes every copy of their lines by `speaker_id`.
-- Never edit this file once it has landed.

ALTER TABLE turns ADD COLUMN speaker_id INTEGER REFERENCES users(id) ON DELETE CASCADE;
ALTER TABLE turns ADD COLUMN speaker_character TEXT;
ALTER TABLE turns ADD COLUMN speaker_name TEXT;
CREATE INDEX turns_speaker ON turns (speaker_id, character_id) WHERE speaker_id IS NOT NULL;

-- The characters an admin added to a scene (/escena añadir). A scene with no row here has
-- one character: the channel's bound one, else the default.
CREATE TABLE scene_members (
    platform     TEXT NOT NULL,
    channel_id   TEXT NOT NULL,
    character_id TEXT NOT NULL,
    added_by     TEXT NOT NULL,
    added_at     TEXT NOT NULL,
    PRIMARY KEY (platform, channel_id, character_id)
);

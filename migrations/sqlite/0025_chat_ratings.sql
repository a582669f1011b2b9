-- Ratings (issue 36): the group chats an operator or the community's admins marked for adults
-- (/escena madura on), where characters rated `mature` may speak; and, per channel, the bound
-- character whose admins were told why it does not speak there (told once per character).
-- Discord's age-restricted channels need no row: the platform says so on every message.
-- Never edit this file once it has landed.

CREATE TABLE chat_ratings (
    platform         TEXT NOT NULL,
    channel_id       TEXT NOT NULL,
    mature           INTEGER NOT NULL DEFAULT 0 CHECK (mature IN (0, 1)),
    marked_by        TEXT,
    marked_at        TEXT,
    notice_character TEXT,
    PRIMARY KEY (platform, channel_id)
);

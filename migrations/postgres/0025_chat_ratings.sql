-- Ratings (issue 36): the group chats marked for adults, and the bound character whose admins
-- were told why it does not speak there (the SQLite twin says more). No change notice: nothing
-- caches these rows, every message reads them.
-- Never edit this file once it has landed.

CREATE TABLE chat_ratings (
    platform         text NOT NULL,
    channel_id       text NOT NULL,
    mature           integer NOT NULL DEFAULT 0 CHECK (mature IN (0, 1)),
    marked_by        text,
    marked_at        text,
    notice_character text,
    PRIMARY KEY (platform, channel_id)
);

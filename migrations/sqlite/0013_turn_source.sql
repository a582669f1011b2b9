-- Where a user's turn came from (issue 16): "<platform>:<chat>:<platform message id>", set by
-- the adapters (NULL for the terminal and for turns written before this migration). A message
-- run again (a worker killed before it marked the message answered, an update Telegram
-- redelivers after a crash) finds its turn instead of storing it twice. Unique per thread: a
-- key never reaches another user's turns. Never edit this file once it has landed.

ALTER TABLE turns ADD COLUMN source_key TEXT;
CREATE UNIQUE INDEX turns_source ON turns (user_id, character_id, scope, source_key)
    WHERE source_key IS NOT NULL;

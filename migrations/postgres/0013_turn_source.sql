-- Where a user's turn came from (issue 16): "<platform>:<chat>:<platform message id>", set by
-- the adapters (NULL for the terminal and for turns written before this migration). A message
-- run again (a worker killed before it marked the message answered, an update Telegram
-- redelivers after a crash) finds its turn instead of storing it twice. Unique per thread: a
-- key never reaches another user's turns. Never edit this file once it has landed.

ALTER TABLE turns ADD COLUMN source_key text;
CREATE UNIQUE INDEX turns_source ON turns (user_id, character_id, scope, source_key)
    WHERE source_key IS NOT NULL;

-- Background jobs claimed by one worker at a time (compaction of a thread's window): a row
-- per job in progress, held until `held_until` (a worker that dies frees it then). A row, not
-- an advisory lock: the claim lasts a whole LLM call, and a session lock would hold one of
-- the inbox pool's few connections for that long.
CREATE TABLE job_claims (
    job_key    text PRIMARY KEY,
    holder     text NOT NULL,
    held_until timestamptz NOT NULL
);

-- The per-user rate limit shared by the workers: each key's LLM calls inside the window,
-- oldest first (at most the limit of them), updated by one statement under the row's lock.
CREATE TABLE rate_limits (
    rate_key text PRIMARY KEY,
    hits     timestamptz[] NOT NULL
);

-- The durable inbox of several workers (issue 16): a platform process stores each update
-- before it acknowledges it to the platform; workers claim one (platform user, chat) pair at a
-- time with a lease, answer its pending messages in arrival order, and record each send.

CREATE TABLE inbox (
    id BIGSERIAL PRIMARY KEY,
    platform TEXT NOT NULL,
    -- The platform's own id of the update: a redelivery (the platform never saw the ack) is
    -- the same row, not a second message.
    update_key TEXT NOT NULL,
    -- The order group: one user in one chat. Its messages are answered in id order, by one
    -- worker at a time.
    pair_key TEXT NOT NULL,
    payload JSONB NOT NULL,
    received_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    attempts INTEGER NOT NULL DEFAULT 0,
    answered_at TIMESTAMPTZ,
    answered_by TEXT,
    UNIQUE (platform, update_key)
);
CREATE INDEX inbox_pending ON inbox (id) WHERE answered_at IS NULL;
CREATE INDEX inbox_pair_pending ON inbox (pair_key, id) WHERE answered_at IS NULL;
CREATE INDEX inbox_answered ON inbox (answered_at) WHERE answered_at IS NOT NULL;

-- One row per pair: its row lock (FOR UPDATE SKIP LOCKED) makes the claim, its lease
-- (claimed_until, on the database's clock) outlives a worker that died holding it only so long.
CREATE TABLE inbox_pairs (
    pair_key TEXT PRIMARY KEY,
    claimed_by TEXT,
    claimed_until TIMESTAMPTZ,
    last_worker TEXT
);

-- What a worker sent for a message, recorded as soon as the platform returned its id: a
-- message with a recorded send is never answered again.
CREATE TABLE outbox (
    inbox_id BIGINT NOT NULL REFERENCES inbox (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    platform_message_id TEXT NOT NULL,
    sent_by TEXT NOT NULL,
    sent_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (inbox_id, seq)
);

-- Workers LISTEN on companion_inbox and wake when a platform process stores a message.
CREATE FUNCTION inbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('companion_inbox', '');
    RETURN NULL;
END;
$$;
CREATE TRIGGER inbox_stored AFTER INSERT ON inbox
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_notify();

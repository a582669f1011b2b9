-- Off the record across a restart (issue 28, A4): that a thread's conversation is off the
-- record, and until when it lasts without a message, so that the next message after a restart
-- or a worker's death (on whichever worker) is refused unstored with a notice instead of being
-- stored as if the user had been told it would be. Never its words: those live in the RAM of
-- the worker that answered them. Never edit this file once it has landed.

CREATE TABLE off_record_threads (
    user_id      bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id text NOT NULL,
    scope        text NOT NULL,
    expires_at   text NOT NULL,
    PRIMARY KEY (user_id, character_id, scope)
);

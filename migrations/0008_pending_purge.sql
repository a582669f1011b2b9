-- Forget is final even across a crash: the delete records, in its own transaction, that the
-- bytes it left (old index segments, old pages in the WAL) still have to be purged. The store
-- resumes every pending purge at start-up and clears the record only once the index has been
-- merged and the WAL checkpointed completely (memory/store/base.py). Never edit this file once
-- it has landed.

CREATE TABLE pending_purges (
    id           INTEGER PRIMARY KEY,
    requested_at TEXT NOT NULL
);

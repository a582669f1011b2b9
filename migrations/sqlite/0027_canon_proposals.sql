-- Canon proposals (issue 37 part B): what a character established about itself or its world
-- in a conversation that its sheet and lore do not say, proposed after the conversation ends
-- and kept until an admin approves it (written into the character's YAML or lore page) or
-- rejects it. `contradicts` holds the sheet or lore text the proposal contradicts, when the
-- check found one. The rows are the character's, not a person's: a proposal holds no person's
-- name, fact or words (checked in code before it is stored, memory/canon/checks.py).
-- `canon_evidence` names the character's own assistant turns a proposal rests on: the turn,
-- the thread it is in (`thread_id`: the users row that owns the thread, a person's own or a
-- scene's; `scope`) and its conversation. A person's forget deletes the pending proposals that
-- rest on their threads, or on a scene conversation they spoke in, and the evidence rows that
-- point there from decided ones (memory/store/canon.py). Never edit this file once it has landed.

CREATE TABLE canon_proposals (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    character_id TEXT NOT NULL,
    text         TEXT NOT NULL,
    contradicts  TEXT,
    status       TEXT NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'approved', 'rejected')),
    created_at   TEXT NOT NULL,
    decided_at   TEXT
);
CREATE INDEX canon_proposals_character ON canon_proposals (character_id, status, id);

CREATE TABLE canon_evidence (
    proposal_id     INTEGER NOT NULL REFERENCES canon_proposals(id) ON DELETE CASCADE,
    turn_id         INTEGER NOT NULL,
    thread_id       INTEGER NOT NULL,
    scope           TEXT NOT NULL,
    conversation_id INTEGER NOT NULL,
    PRIMARY KEY (proposal_id, turn_id)
);
CREATE INDEX canon_evidence_thread ON canon_evidence (thread_id, scope);
CREATE INDEX canon_evidence_conversation ON canon_evidence (conversation_id);

-- Which ended conversation was read for proposals, and how (done, nothing, rejected, off,
-- empty, failed, predates), so that each is read once and what was owed at a crash is found
-- again; it goes with its conversation.
CREATE TABLE canon_runs (
    conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    character_id    TEXT NOT NULL,
    status          TEXT NOT NULL,
    created_at      TEXT NOT NULL
);

-- The conversations that ended before canon proposals existed are not read after the fact:
-- an upgrade must not call the model once for every old conversation.
INSERT INTO canon_runs (conversation_id, character_id, status, created_at)
SELECT id, character_id, 'predates', ended_at FROM conversations WHERE ended_at IS NOT NULL;

-- Full-text index over the turn log, for search_memory and the automatic fragments of a turn.
-- Never edit this file once it has landed.
--
-- One row per TURN, not per exchange. Turns are immutable and are the unit a user deletes, so a
-- turn is indexed once when written and removed once when deleted, with the exact values the
-- trigger sees in OLD. An exchange (a user turn and the reply after it) only exists once the
-- reply is stored: an exchange index would be rewritten on every reply, and deleting one turn
-- would have to rebuild its neighbour's row. memory/retrieval.py assembles and ranks exchanges
-- at query time from the turns this index finds.
--
-- Contentless (content=''): the index holds tokens only, never a second copy of the text, which
-- is read from `turns`. SQLite 3.40, the version we run on, has neither contentless_delete (3.43)
-- nor the secure-delete option (3.44), so a deletion is the FTS5 'delete' command with the old
-- values, and the deleted tokens stay in older index segments until they are merged:
-- Store.purge_search_index() ('optimize') must follow a deletion ("forget me") for the words to
-- be gone from the file.
--
-- `owner` holds two tokens, the owner (user id, character id in hex) and the scope (in hex). Every
-- query ANDs them, so the index narrows to one user's thread with one character before ranking;
-- the join on `turns` then checks user_id and character_id again.
-- unicode61 with remove_diacritics 2: "canción" and "cancion" are one token; no stemmer, because
-- the bot speaks Spanish as much as English (memory/fts.py stems queries by prefix instead).
-- Tool turns (lore pages, lookups) are not what the user said and are not indexed.

CREATE VIRTUAL TABLE turn_search USING fts5(
    owner,
    text,
    content = '',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER turn_search_insert AFTER INSERT ON turns
WHEN new.role IN ('user', 'assistant')
BEGIN
    INSERT INTO turn_search (rowid, owner, text) VALUES (
        new.id,
        'o' || new.user_id || 'c' || lower(hex(new.character_id))
            || ' s' || lower(hex(new.scope)),
        new.text
    );
END;

CREATE TRIGGER turn_search_delete AFTER DELETE ON turns
WHEN old.role IN ('user', 'assistant')
BEGIN
    INSERT INTO turn_search (turn_search, rowid, owner, text) VALUES (
        'delete',
        old.id,
        'o' || old.user_id || 'c' || lower(hex(old.character_id))
            || ' s' || lower(hex(old.scope)),
        old.text
    );
END;

-- Turns are never updated; should one ever be, the index follows instead of drifting out of sync
-- (a contentless index cannot be repaired without the old values).
CREATE TRIGGER turn_search_update AFTER UPDATE OF user_id, character_id, scope, role, text ON turns
BEGIN
    INSERT INTO turn_search (turn_search, rowid, owner, text)
    SELECT 'delete', old.id,
        'o' || old.user_id || 'c' || lower(hex(old.character_id)) || ' s' || lower(hex(old.scope)),
        old.text
    WHERE old.role IN ('user', 'assistant');
    INSERT INTO turn_search (rowid, owner, text)
    SELECT new.id,
        'o' || new.user_id || 'c' || lower(hex(new.character_id)) || ' s' || lower(hex(new.scope)),
        new.text
    WHERE new.role IN ('user', 'assistant');
END;

-- Turns written before this migration.
INSERT INTO turn_search (rowid, owner, text)
SELECT id, 'o' || user_id || 'c' || lower(hex(character_id)) || ' s' || lower(hex(scope)), text
FROM turns
WHERE role IN ('user', 'assistant');

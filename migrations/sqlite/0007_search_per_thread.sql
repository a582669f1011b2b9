-- The search index, rebuilt so that every token carries its thread: a query reads only the
-- doclists of one user's turns with one character, however large the turn log grows (with
-- 0003's shared tokens a prefix query read every user's doclist: 26 ms at 10^6 turns against
-- 0.6 ms at 10^3). Never edit this file once it has landed.
--
-- thread_tokens(user_id, character_id, scope, text) is registered by the Store on every
-- connection (memory/fts.py): "<owner>s<scope hex>" once, then "<owner>w<word>" per word,
-- with <owner> = "o<user id>c<character id hex>"; words are folded as unicode61 with
-- remove_diacritics 2 would fold them. Still contentless: no second copy of the text.

DROP TRIGGER turn_search_insert;
DROP TRIGGER turn_search_delete;
DROP TRIGGER turn_search_update;
DROP TABLE turn_search;

CREATE VIRTUAL TABLE turn_search USING fts5(
    text,
    content = '',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER turn_search_insert AFTER INSERT ON turns
WHEN new.role IN ('user', 'assistant')
BEGIN
    INSERT INTO turn_search (rowid, text)
    VALUES (new.id, thread_tokens(new.user_id, new.character_id, new.scope, new.text));
END;

CREATE TRIGGER turn_search_delete AFTER DELETE ON turns
WHEN old.role IN ('user', 'assistant')
BEGIN
    INSERT INTO turn_search (turn_search, rowid, text)
    VALUES ('delete', old.id, thread_tokens(old.user_id, old.character_id, old.scope, old.text));
END;

CREATE TRIGGER turn_search_update AFTER UPDATE OF user_id, character_id, scope, role, text ON turns
BEGIN
    INSERT INTO turn_search (turn_search, rowid, text)
    SELECT 'delete', old.id, thread_tokens(old.user_id, old.character_id, old.scope, old.text)
    WHERE old.role IN ('user', 'assistant');
    INSERT INTO turn_search (rowid, text)
    SELECT new.id, thread_tokens(new.user_id, new.character_id, new.scope, new.text)
    WHERE new.role IN ('user', 'assistant');
END;

INSERT INTO turn_search (rowid, text)
SELECT id, thread_tokens(user_id, character_id, scope, text)
FROM turns
WHERE role IN ('user', 'assistant');

-- The search index again, its words now spelled with ASCII letters and digits only
-- (memory/fts.py: index_word). Python's tokeniser and unicode61 disagree on thousands of
-- characters; a word that unicode61 split could plant a token carrying another user's owner
-- prefix. The triggers are unchanged: they call thread_tokens(), which now spells each word
-- so. The table is contentless, so the old tokens cannot be deleted one by one: all go, and
-- every turn is indexed anew. Never edit this file once it has landed.

INSERT INTO turn_search (turn_search) VALUES ('delete-all');

INSERT INTO turn_search (rowid, text)
SELECT id, thread_tokens(user_id, character_id, scope, text)
FROM turns
WHERE role IN ('user', 'assistant');

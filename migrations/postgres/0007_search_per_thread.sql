-- The search index per thread (PostgreSQL dialect of migrations/0007_search_per_thread.sql,
-- which made every SQLite token carry its owner): here one GIN index over (user_id,
-- character_id, search) with btree_gin, so a query reads the posting lists of one user's turns
-- with one character only, however large the turn log grows. Never edit this file once it has
-- landed.
--
-- fastupdate off: new turns go straight into the index, not into a pending list that every
-- search then reads in full until a VACUUM flushes it (a search per message, a few inserts).

CREATE EXTENSION IF NOT EXISTS btree_gin;
DROP INDEX turns_search;
CREATE INDEX turns_search ON turns USING gin (user_id, character_id, search)
    WITH (fastupdate = off);

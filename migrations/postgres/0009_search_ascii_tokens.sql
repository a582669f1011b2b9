-- Nothing to do on PostgreSQL (kept so both dialects share their numbering). SQLite's 0009
-- respelled its FTS5 tokens in ASCII because unicode61 and Python split words differently; here
-- the lexemes are written as a tsvector literal from Python's own words (0003) and no parser of
-- the server's ever splits them. Never edit this file once it has landed.

SELECT 1;

-- Full-text search over the turn log (PostgreSQL dialect of migrations/0003_search.sql), on
-- PostgreSQL's own machinery: a tsvector per turn, a GIN index, tsquery matching with prefixes
-- and ts_rank. Never edit this file once it has landed.
--
-- The lexemes are the project's own folded words (memory/search/terms.py: words(), lower case without
-- diacritics, letters and digits), written by the store as a tsvector literal with positions
-- (memory/store/postgres/search.py), not parsed by a language configuration: the Python BM25
-- of memory/search/retrieval.py scores the candidates with patterns over the same folded words, so
-- candidate selection and scoring agree token for token, in Spanish as in English, and the
-- tokens do not depend on the server's locale (the default parser counts every non-ASCII
-- character as a letter under the C locale: "¿dónde" would be one word). Query terms are the
-- same `Term` objects as on SQLite, a stem searched as a prefix ('stem':*).
-- Tool turns (lore pages, lookups) are not what the user said and are not indexed (NULL).

ALTER TABLE turns ADD COLUMN search tsvector;
CREATE INDEX turns_search ON turns USING gin (search);

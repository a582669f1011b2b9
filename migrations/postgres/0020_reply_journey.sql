-- /memoria porque names the journey (issue 30) when it was in the reply's prompt: the id of
-- the journey row block 2 showed. No foreign key: each conversation's chronicle replaces the
-- row (a new id), and porque must still say that a journey was shown, then rewritten.
-- Never edit this file once it has landed.

ALTER TABLE reply_sources ADD COLUMN journey_id bigint;

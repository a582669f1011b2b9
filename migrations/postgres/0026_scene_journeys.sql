-- The story of each scene (issue 37 A): every character present in a group scene keeps its
-- own chronicle of it, written from its own copy only. It is a `journeys` row (0019) owned by
-- the scene's row in `users` (platform user id "scene:<channel id>"), one per character, and
-- `journey_runs` says which of the copy's conversations were chronicled. Until now a scene's
-- conversations were marked 'off' as they ended; one that ended and was not yet marked when
-- this runs is not chronicled after the fact either: an upgrade must not call the model for
-- the past. A person's forget in the group rewrites these rows (their sentences go); a reset
-- by an admin deletes them. Never edit this file once it has landed.

INSERT INTO journey_runs (conversation_id, user_id, character_id, status, created_at)
SELECT c.id, c.user_id, c.character_id, 'predates', c.ended_at FROM conversations c
WHERE c.ended_at IS NOT NULL AND c.scope LIKE 'scene:%'
AND NOT EXISTS (SELECT 1 FROM journey_runs r WHERE r.conversation_id = c.id);

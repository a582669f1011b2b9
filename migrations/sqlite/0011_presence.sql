-- A companion alive between messages (issue 17): the user's time zone, for the local date and
-- time in the prompt and for follow-ups at a sensible local hour. Never edit this file once it
-- has landed.

ALTER TABLE user_preferences ADD COLUMN timezone TEXT;

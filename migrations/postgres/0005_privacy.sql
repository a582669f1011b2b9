-- The user's own memory controls: review mode, and what each reply was built from (PostgreSQL
-- dialect of migrations/0005_privacy.sql). Never edit this file once it has landed.

CREATE TABLE user_preferences (
    user_id     bigint PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    review_mode integer NOT NULL DEFAULT 0
);

CREATE TABLE reply_sources (
    turn_id           bigint PRIMARY KEY REFERENCES turns(id) ON DELETE CASCADE,
    user_id           bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    character_id      text NOT NULL,
    fact_ids          text NOT NULL,
    summary_id        bigint REFERENCES summaries(id) ON DELETE SET NULL,
    window_turn_ids   text NOT NULL,
    fragment_turn_ids text NOT NULL,
    created_at        text NOT NULL
);
CREATE INDEX reply_sources_owner ON reply_sources (user_id, character_id, turn_id);

CREATE TRIGGER user_preferences_changed AFTER INSERT OR UPDATE OR DELETE ON user_preferences
    FOR EACH STATEMENT EXECUTE FUNCTION companion_notify_change();

-- Who may talk (issue 36, bot/access.py): the operator's allowed and blocked lists, the
-- switches (DMs on or off, invite-only) and a version every change raises, so that each
-- worker re-reads the rules within seconds of a change made anywhere. A rule keeps only a
-- platform id (a person, a group, a server, a channel or a role), never anything a person
-- wrote, so a person's forget leaves their block in place.
-- Never edit this file once it has landed.

CREATE TABLE access_rules (
    platform  TEXT NOT NULL,
    kind      TEXT NOT NULL CHECK (kind IN ('user', 'group', 'server', 'channel', 'role')),
    target_id TEXT NOT NULL,
    effect    TEXT NOT NULL CHECK (effect IN ('allow', 'block')),
    set_by    TEXT NOT NULL,
    set_at    TEXT NOT NULL,
    PRIMARY KEY (platform, kind, target_id, effect)
);

-- 'dms' and 'invite_only' (0 or 1; no row: DMs on, invite-only off) and 'version' (raised
-- by every change).
CREATE TABLE access_settings (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);

-- When a refused person was last told so in a private chat: at most once a day, whichever
-- worker refuses them.
CREATE TABLE access_notices (
    platform TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    told_at  TEXT NOT NULL,
    PRIMARY KEY (platform, user_id)
);

"""When a dated fact is owed a follow-up, in SQL both backends run as written: the job's read
of what is due and the engine's re-check right before it writes one use this one condition,
so the two cannot disagree (a forget, `/avisos off` or a follow-up sent by another worker
between them is seen by the re-check)."""

from __future__ import annotations

# On `facts f`: learned in a private chat, still active, dated; its user said yes to follow-ups
# with its character (offered and never answered, or `/avisos off`, is no); not followed up yet.
OWED = (
    "f.scope = 'dm' AND f.status = 'active' AND f.event_date IS NOT NULL"
    " AND EXISTS (SELECT 1 FROM followup_settings s WHERE s.user_id = f.user_id"
    " AND s.character_id = f.character_id AND s.enabled = 1)"
    " AND NOT EXISTS (SELECT 1 FROM followups x WHERE x.fact_id = f.id)"
)

# Each user's dated facts (learned in a private chat) with a character they were never offered
# follow-ups with, oldest first: records.followup_offers keeps the first of each pair.
OFFERS_DUE = (
    "SELECT f.*, u.platform, u.platform_user_id, u.display_name, p.timezone"
    " FROM facts f JOIN users u ON u.id = f.user_id"
    " LEFT JOIN user_preferences p ON p.user_id = f.user_id"
    " WHERE f.scope = 'dm' AND f.status = 'active' AND f.event_date IS NOT NULL"
    " AND NOT EXISTS (SELECT 1 FROM followup_settings s WHERE s.user_id = f.user_id"
    " AND s.character_id = f.character_id AND s.offered_at IS NOT NULL)"
    " ORDER BY f.id"
)

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

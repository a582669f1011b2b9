"""SQL both backends run as written: PostgreSQL's numbered parameters ($1), which the SQLite
store turns into its own numbered form (?1) with `numbered`. What a dialect does its own way
(upserts, locks, RETURNING, full-text search, arrays) stays in the backend's module."""

from __future__ import annotations

import re

_DOLLAR = re.compile(r"\$(\d+)")

# Every exchange (user turn to the next user turn of its conversation; the turns before a
# conversation's first user turn form one of their own) holding a turn `t`: its conversation,
# first turn and the next exchange's first turn. The backend adds how `t` is looked up.
EXCHANGE_SPAN = (
    "WITH span AS (SELECT DISTINCT t.conversation_id AS cid,"
    " coalesce((SELECT p.id FROM turns p WHERE p.conversation_id = t.conversation_id"
    "  AND p.id <= t.id AND p.role = 'user' ORDER BY p.id DESC LIMIT 1),"
    "  (SELECT min(p.id) FROM turns p WHERE p.conversation_id = t.conversation_id)) AS lo,"
    " (SELECT n.id FROM turns n WHERE n.conversation_id = t.conversation_id"
    "  AND n.id > t.id AND n.role = 'user' ORDER BY n.id LIMIT 1) AS hi"
)

# The statements of an extraction's operations, by the name `params.fact_changes` gives them.
FACT_WRITES = {
    "insert": "INSERT INTO facts (user_id, character_id, kind, key, scope, created_at, value,"
    " origin, evidence, lifetime, event_date, confirmed_at, expires_at, status)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
    "archive": "INSERT INTO fact_history (fact_id, user_id, value, origin, evidence,"
    " valid_from, superseded_at, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    "overwrite": "UPDATE facts SET value = $1, origin = $2, evidence = $3, lifetime = $4,"
    " event_date = $5, confirmed_at = $6, expires_at = $7, status = $8"
    " WHERE id = $9 AND user_id = $10",
    "delete": "DELETE FROM facts WHERE id = $1 AND user_id = $2",
}


def numbered(statement: str) -> str:
    """A statement written with $N parameters, in SQLite's ?N (the same numbers)."""
    return _DOLLAR.sub(r"?\1", statement)

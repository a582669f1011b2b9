"""The store on PostgreSQL (asyncpg): every interface of memory/store/protocols.py, one module
per concern as in the SQLite backend. Open it with `await PostgresStore.open("postgresql://...")`
(or through `memory.store.open_store`)."""

from memory.store.postgres.access import PgAccessMixin
from memory.store.postgres.base import (
    available_pg_migrations,
    connection_problem,
    normalise_url,
    redact_url,
)
from memory.store.postgres.budgets import PgBudgetsMixin
from memory.store.postgres.canon import PgCanonMixin
from memory.store.postgres.conversations import PgConversationsMixin
from memory.store.postgres.copy import PgCopyMixin
from memory.store.postgres.dead_letters import PgDeadLettersMixin
from memory.store.postgres.journeys import PgJourneysMixin
from memory.store.postgres.presence import PgPresenceMixin
from memory.store.postgres.privacy import PgPrivacyMixin
from memory.store.postgres.profile import PgProfileMixin
from memory.store.postgres.ratings import PgRatingsMixin
from memory.store.postgres.scene_journeys import PgSceneJourneysMixin
from memory.store.postgres.scenes import PgScenesMixin
from memory.store.postgres.search import PgSearchMixin


class PostgresStore(
    PgBudgetsMixin,
    PgConversationsMixin,
    PgProfileMixin,
    PgSearchMixin,
    PgPrivacyMixin,
    PgCopyMixin,
    PgPresenceMixin,
    PgDeadLettersMixin,
    PgJourneysMixin,
    PgScenesMixin,
    PgAccessMixin,
    PgRatingsMixin,
    PgSceneJourneysMixin,
    PgCanonMixin,
):
    """Everything the engine keeps, on PostgreSQL 15 or later."""


__all__ = [
    "PostgresStore",
    "available_pg_migrations",
    "connection_problem",
    "normalise_url",
    "redact_url",
]

"""The embedded SQLite backend: one file, one thread that owns the connection, group commit,
FTS5 search, `PRAGMA data_version` as the change feed, and a background purge of a forget's
bytes (index merge and WAL truncation)."""

from memory.store.sqlite.access import AccessMixin
from memory.store.sqlite.base import available_migrations
from memory.store.sqlite.budgets import BudgetsMixin
from memory.store.sqlite.canon import CanonMixin
from memory.store.sqlite.conversations import ConversationsMixin
from memory.store.sqlite.copy import CopyMixin
from memory.store.sqlite.dead_letters import DeadLettersMixin
from memory.store.sqlite.journeys import JourneysMixin
from memory.store.sqlite.presence import PresenceMixin
from memory.store.sqlite.privacy import PrivacyMixin
from memory.store.sqlite.profile import ProfileMixin
from memory.store.sqlite.ratings import RatingsMixin
from memory.store.sqlite.scene_journeys import SceneJourneysMixin
from memory.store.sqlite.search import SearchMixin


class SqliteStore(
    BudgetsMixin,
    ConversationsMixin,
    ProfileMixin,
    SearchMixin,
    PrivacyMixin,
    PresenceMixin,
    CopyMixin,
    DeadLettersMixin,
    JourneysMixin,
    AccessMixin,
    RatingsMixin,
    SceneJourneysMixin,
    CanonMixin,
):
    """Every interface of memory/store/protocols.py on one SQLite file:
    `await SqliteStore.open(path)`."""


__all__ = ["SqliteStore", "available_migrations"]

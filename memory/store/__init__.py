"""The one owner of the database connection: every SQL statement of the project lives in this
package (FTS5 aside, in `memory/fts.py`, which only the store calls), one module per concern."""

from memory.store.base import ConversationGone, SchemaTooNewError, StoreBase, available_migrations
from memory.store.conversations import ConversationsMixin
from memory.store.privacy import PrivacyMixin
from memory.store.profile import ProfileMixin
from memory.store.search import SearchMixin


class Store(ConversationsMixin, ProfileMixin, SearchMixin, PrivacyMixin):
    """Everything the engine keeps: open it with `await Store.open(path)`."""


__all__ = ["ConversationGone", "SchemaTooNewError", "Store", "StoreBase", "available_migrations"]

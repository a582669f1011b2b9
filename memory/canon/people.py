"""What we hold of the people of a conversation, as the canon checks compare a proposal
against it: their names (display names, the names they wrote), the values of their profile
facts, and the runs of words they said. Read from the store, never from a word list."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memory.canon.words import names_in, ngrams, words
from memory.models import Conversation, Fact, Turn, User

# A run of this many words said by a person, found in a proposal, is their words.
NGRAM = 4
# Of which this many at least are words of four letters or more: "que no se lo" is anyone's.
NGRAM_CONTENT = 2


class PeopleReader(Protocol):
    async def facts(
        self, user_id: int, character_id: str, scope: str | None = None
    ) -> list[Fact]: ...

    async def platform_identity(self, user_id: int) -> str | None: ...

    async def find_user(self, platform: str, platform_user_id: str) -> User | None: ...


@dataclass(frozen=True)
class PeopleData:
    names: frozenset[str] = frozenset()  # folded words of their names
    fact_values: tuple[str, ...] = ()
    runs: frozenset[tuple[str, ...]] = field(default_factory=frozenset)


def is_person_line(turn: Turn) -> bool:
    """A person's line: a user turn that no other character spoke."""
    return turn.role == "user" and (turn.speaker is None or turn.speaker.character_id is None)


def person_ids(conversation: Conversation, turns: Sequence[Turn]) -> list[int]:
    """The people of the conversation: the thread's owner in private, every speaker in a
    scene (the scene's own row is nobody)."""
    if not conversation.thread.is_scene:
        return [conversation.thread.user_id]
    found = {t.speaker.person_id for t in turns if t.speaker and t.speaker.person_id}
    return sorted(found)


async def display_name(store: PeopleReader, user_id: int) -> str:
    identity = await store.platform_identity(user_id)
    if identity is None:
        return ""
    platform, _, platform_user_id = identity.partition(":")
    user = await store.find_user(platform, platform_user_id)
    return user.display_name if user is not None else ""


def _content_run(run: tuple[str, ...]) -> bool:
    return sum(len(w) >= 4 for w in run) >= NGRAM_CONTENT


async def people_data(
    store: PeopleReader, conversation: Conversation, turns: Sequence[Turn]
) -> PeopleData:
    """Everything of the conversation's people a proposal must not hold."""
    character = conversation.thread.character_id
    names: set[str] = set()
    values: list[str] = []
    for person in person_ids(conversation, turns):
        names.update(words(await display_name(store, person)))
        values += [f.value for f in await store.facts(person, character)]
    runs: set[tuple[str, ...]] = set()
    for turn in turns:
        if not is_person_line(turn):
            continue
        if turn.speaker is not None:
            names.update(words(turn.speaker.name))
        names.update(names_in(turn.text))
        runs.update(r for r in ngrams(words(turn.text), NGRAM) if _content_run(r))
    return PeopleData(frozenset(n for n in names if len(n) >= 3), tuple(values), frozenset(runs))

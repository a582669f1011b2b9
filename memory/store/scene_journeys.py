"""Each character's chronicle of a group scene (issue 37 A, migration 0026), as the store
offers it. A scene's chronicle is a journey row (migration 0019) owned by the scene's row in
`users` (platform user id `scene:<channel id>`), one per character: the journeys' own methods
read, replace, rewrite and delete it, and `journey_runs` says which of the copy's conversations
were chronicled. These are the few things only a scene needs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memory.journey.model import Journey
from memory.models import Conversation


@dataclass(frozen=True)
class SceneSpeech:
    """A person's lines in one scene, in every character's copy, and the names they spoke
    under (the display name each line was said with)."""

    line_ids: frozenset[int]
    names: frozenset[str]


class SceneJourneys(Protocol):
    async def conversations_pending_scene_journey(self) -> list[Conversation]:
        """Ended conversations of scene copies not yet chronicled, oldest first."""
        ...

    async def scene_speech(self, person_id: int, scene_scope: str) -> SceneSpeech: ...

    async def reset_scene_journeys(self, owner_id: int, now: datetime) -> int:
        """A scene's reset by an admin: every character's chronicle of it goes (its bytes
        purged), and its ended conversations not yet chronicled are marked `reset`, so no
        chronicle written from before the reset lands after it. The chronicles deleted."""
        ...

    async def scene_journeys(self, character_id: str) -> list[tuple[str, Journey]]:
        """(scene scope, chronicle) of every scene this character keeps one of."""
        ...

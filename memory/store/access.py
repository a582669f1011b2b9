"""Who may talk (issue 36): the store's face for the operator's access rules, and their rows.
The decision itself is bot/access.py's; this is what a backend keeps (migration 0023)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

RuleKind = Literal["user", "group", "server", "channel", "role"]
Effect = Literal["allow", "block"]
RULE_KINDS: tuple[RuleKind, ...] = ("user", "group", "server", "channel", "role")
EFFECTS: tuple[Effect, ...] = ("allow", "block")
FLAGS = ("dms", "invite_only")


@dataclass(frozen=True)
class AccessRule:
    """One id on the allowed or the blocked list: a platform's id, nothing else."""

    platform: str
    kind: RuleKind
    target_id: str
    effect: Effect


@dataclass(frozen=True)
class AccessState:
    """Every rule and switch, and the version they were read at."""

    rules: frozenset[AccessRule] = frozenset()
    dms: bool = True
    invite_only: bool = False
    version: int = 0


def tightened(state: AccessState) -> list[tuple[str, int]]:
    """The switches a start-up's settings impose: only ever the stricter value (DMs off,
    invite-only on), so that a live change loosening them lasts until the .env says otherwise."""
    found = [("dms", 0)] if not state.dms else []
    return found + ([("invite_only", 1)] if state.invite_only else [])


class AccessRules(Protocol):
    async def access_version(self) -> int:
        """Raised by every change: a cheap look for whether the rules must be read again."""
        ...

    async def access_state(self) -> AccessState: ...

    async def set_access_rule(
        self, rule: AccessRule, present: bool, by: str, now: datetime
    ) -> bool:
        """Add (present) or remove the rule; False when nothing changed."""
        ...

    async def set_access_flag(self, name: str, value: bool) -> None:
        """'dms' or 'invite_only'."""
        ...

    async def merge_access(self, state: AccessState, by: str, now: datetime) -> int:
        """The .env's rules added (those present stay), and its switches where they are the
        stricter (`tightened`), in one transaction; the number of changes made."""
        ...

    async def claim_access_notice(
        self, platform: str, user_id: str, now: datetime, since: datetime
    ) -> bool:
        """True for the one caller that should tell this person now: nobody told them
        after `since`. The claim is recorded as told at `now`."""
        ...

"""Who may talk (issue 36): the operator's rules for people, groups, servers, channels and
Discord roles, checked before anything of a message is stored or sent to the model.

The rules (docs/deploy.md, "Before opening to the public"):
- operators (ADMIN_IDS) and the terminal are never refused;
- a block of the person, or of where they write (the Telegram group, the Discord server or
  channel, one of the member's roles), refuses; a block wins over any allow;
- a private chat with DMs off is refused unless the person is on the allowed list;
- invite-only refuses whoever is not listed: in a private chat the person must be allowed, in
  a community the person, the group, server or channel, or one of their roles.
A refused private message gets one short line at most once a day (recorded in the database,
so it holds across workers and restarts); a refused group message gets nothing. /memoria and
/yo are never refused: access never limits a person's data rights, nor finding one's own id.
Every process re-reads the rules when their version moves, checked every few seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Literal

from bot.answers import Answer, Caller
from bot.texts import text
from memory.store.access import (
    EFFECTS,
    RULE_KINDS,
    AccessRule,
    AccessRules,
    AccessState,
    Effect,
    RuleKind,
)

Reason = Literal["blocked", "dms_off", "invite_only"]
NOTICE_EVERY = timedelta(days=1)
# Commands a refused person keeps: their data rights, and finding their own ids.
ALWAYS_OPEN = ("memoria", "yo")
NEVER_REFUSED_PLATFORMS = frozenset({"terminal"})  # the operator's own chat
# The words a rule's kind is written with, in either language.
KIND_WORDS: dict[str, RuleKind] = {
    "user": "user", "persona": "user", "usuario": "user",
    "group": "group", "grupo": "group",
    "server": "server", "servidor": "server", "guild": "server",
    "channel": "channel", "canal": "channel",
    "role": "role", "rol": "role",
}  # fmt: skip


class RuleError(ValueError):
    """A rule written wrong; the message says how to write it."""


def parse_rule(spec: str, effect: Effect, platform: str | None = None) -> AccessRule:
    """'telegram:user:123' (or 'user:123' with `platform` given) as a rule."""
    parts = [part.strip() for part in spec.strip().split(":")]
    if platform is not None and len(parts) == 2:
        parts = [platform, *parts]
    if len(parts) != 3 or not all(parts) or parts[1].casefold() not in KIND_WORDS:
        raise RuleError(
            f"'{spec}': write PLATFORM:KIND:ID, KIND one of {', '.join(RULE_KINDS)} "
            "(telegram:user:123, discord:role:456)"
        )
    return AccessRule(parts[0].casefold(), KIND_WORDS[parts[1].casefold()], parts[2], effect)


def parse_rules(specs: Iterable[str], effect: Effect) -> list[AccessRule]:
    return [parse_rule(spec, effect) for spec in specs if spec.strip()]


def rule_text(rule: AccessRule) -> str:
    return f"{rule.platform}:{rule.kind}:{rule.target_id}"


def places_of(caller: Caller) -> list[tuple[RuleKind, str]]:
    """Where a group message was written, as rules name it: a Telegram group is its own
    channel (either kind names it); a Discord channel lies in a server, the member has roles."""
    if caller.channel_kind != "group":
        return []
    places: list[tuple[RuleKind, str]] = [
        ("group", caller.channel_id),
        ("channel", caller.channel_id),
    ]
    if caller.guild_id:
        places.append(("server", caller.guild_id))
    places += [("role", role) for role in caller.role_ids]
    return places


def decide(state: AccessState, caller: Caller) -> Reason | None:
    """Why this caller is refused under these rules, or None (operators are checked first,
    by `Access`)."""

    def listed(kind: RuleKind, target: str, effect: Effect) -> bool:
        return AccessRule(caller.platform, kind, target, effect) in state.rules

    places = places_of(caller)
    if listed("user", caller.user_id, "block") or any(
        listed(kind, target, "block") for kind, target in places
    ):
        return "blocked"
    person_allowed = listed("user", caller.user_id, "allow")
    if caller.channel_kind == "dm":
        if not state.dms and not person_allowed:
            return "dms_off"
        return "invite_only" if state.invite_only and not person_allowed else None
    place_allowed = any(listed(kind, target, "allow") for kind, target in places)
    if state.invite_only and not (person_allowed or place_allowed):
        return "invite_only"
    return None


class Access:
    """The rules as one process sees them: read from the store, re-read when their version
    moves (looked at every `refresh_seconds`), changed through here or by another process."""

    def __init__(
        self,
        store: AccessRules,
        admin_ids: Iterable[str],
        clock: Callable[[], datetime],
        refresh_seconds: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._admins = frozenset(admin_ids)
        self._clock = clock
        self._refresh = refresh_seconds
        self._monotonic = monotonic
        self._state: AccessState | None = None
        self._looked = -math.inf

    async def state(self) -> AccessState:
        """The rules, at most `refresh_seconds` behind the database's."""
        now = self._monotonic()
        if self._state is not None and now - self._looked < self._refresh:
            return self._state
        self._looked = now
        if self._state is None or await self._store.access_version() != self._state.version:
            self._state = await self._store.access_state()
        return self._state

    def is_operator(self, caller: Caller) -> bool:
        return (
            caller.platform in NEVER_REFUSED_PLATFORMS
            or f"{caller.platform}:{caller.user_id}" in self._admins
        )

    async def reason(self, caller: Caller) -> Reason | None:
        if self.is_operator(caller):
            return None
        return decide(await self.state(), caller)

    async def refusal(self, caller: Caller, language: str) -> Answer | None:
        """None when the caller may talk; else what to send instead of an answer: one line in
        a private chat at most once a day, nothing ("") otherwise. Nothing is stored but the
        time the person was told."""
        reason = await self.reason(caller)
        if reason is None:
            return None
        if caller.channel_kind == "group":
            return Answer("", ok=False)
        now = self._clock().astimezone(UTC)
        told = await self._store.claim_access_notice(
            caller.platform, caller.user_id, now, now - NOTICE_EVERY
        )
        return Answer(text(language, f"access_{reason}") if told else "", ok=False)

    async def command_refusal(
        self, caller: Caller, command_key: str, language: str
    ) -> Answer | None:
        """A refused person's command other than /memoria and /yo: the same line, privately
        (they asked for an answer, so it is given each time)."""
        if command_key.split(".")[0] in ALWAYS_OPEN:
            return None
        reason = await self.reason(caller)
        if reason is None:
            return None
        return Answer(text(language, f"access_{reason}"), ok=False, private=True)

    # ---- the operator's changes (/admin acceso, companion access) -------------------------

    async def merge(self, state: AccessState, now: datetime) -> int:
        """The .env's rules added at start-up and its stricter switches applied."""
        changes = await self._store.merge_access(state, "env", now)
        self._state = None
        return changes

    async def set_rule(self, rule: AccessRule, present: bool, by: str) -> bool:
        changed = await self._store.set_access_rule(rule, present, by, self._clock())
        self._state = None  # this process sees its own change at once
        return changed

    async def set_flag(self, name: str, value: bool) -> None:
        await self._store.set_access_flag(name, value)
        self._state = None

    async def listing(self) -> list[str]:
        """The rules and switches as lines, the same in every language (ids and keywords)."""
        self._state = None
        state = await self.state()
        lines = [
            f"dms: {'on' if state.dms else 'off'}",
            f"invite-only: {'on' if state.invite_only else 'off'}",
        ]
        for effect in EFFECTS:
            found = sorted(rule_text(r) for r in state.rules if r.effect == effect)
            lines.append(f"{effect}: {', '.join(found) if found else '-'}")
        return lines

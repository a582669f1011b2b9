"""/admin acceso (the operator's access rules, changed live), /yo (one's own ids), and the
refusal of a refused person's commands (bot/access.py has the rules)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.access import Access, RuleError, parse_rule
from bot.answers import Answer, Caller
from bot.texts import text
from memory.store.access import Effect

Language = Callable[[Caller], Awaitable[str]]
# /admin acceso's actions, by the registry's keys: (effect, present) of a rule change.
RULE_ACTIONS: dict[str, tuple[Effect, bool]] = {
    "permitir": ("allow", True),
    "bloquear": ("block", True),
    "revocar": ("allow", False),
    "desbloquear": ("block", False),
}
FLAG_ACTIONS = {"privados": "dms", "invitacion": "invite_only"}


class AccessCommands:
    def __init__(self, access: Access, language: Language) -> None:
        self._access = access
        self._language = language

    async def refused(self, caller: Caller, command_key: str) -> Answer | None:
        """A refused person's command (not /memoria nor /yo) gets their refusal line."""
        return await self._access.command_refusal(caller, command_key, await self._language(caller))

    async def whoami(self, caller: Caller) -> Answer:
        """/yo: the ids rules are written with, answered privately."""
        ids = [f"{caller.platform}:user:{caller.user_id}"]
        if caller.channel_kind == "group":
            kind = "channel" if caller.guild_id else "group"
            ids.append(f"{caller.platform}:{kind}:{caller.channel_id}")
        if caller.guild_id:
            ids.append(f"{caller.platform}:server:{caller.guild_id}")
        ids += [f"{caller.platform}:role:{role}" for role in caller.role_ids]
        words = text(await self._language(caller), "whoami", ids=", ".join(ids))
        return Answer(words, private=True)

    async def run(self, caller: Caller, action: str, args: list[str]) -> Answer:
        """/admin acceso ACTION [ARGS]: operators only, answered privately."""
        language = await self._language(caller)
        if not self._access.is_operator(caller):
            return Answer(text(language, "admins_only"), ok=False, private=True)
        by = f"{caller.platform}:{caller.user_id}"
        if action in RULE_ACTIONS:
            effect, present = RULE_ACTIONS[action]
            platform, _, target = args[1].rpartition(":")  # an id of another platform: p:ID
            try:
                rule = parse_rule(f"{platform or caller.platform}:{args[0]}:{target}", effect)
            except RuleError as error:
                return Answer(str(error), ok=False, private=True)
            changed = await self._access.set_rule(rule, present, by)
            return self._done(language, changed, await self._access.listing())
        if action in FLAG_ACTIONS:
            await self._access.set_flag(FLAG_ACTIONS[action], args[0].casefold() == "on")
            return self._done(language, True, await self._access.listing())
        return Answer("\n".join(await self._access.listing()), private=True)

    @staticmethod
    def _done(language: str, changed: bool, listing: list[str]) -> Answer:
        head = text(language, "access_changed" if changed else "access_unchanged")
        return Answer("\n".join([head, *listing]), private=True)

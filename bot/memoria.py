"""/memoria: parse the subcommand, call the MemoryService, and word the answer.

Every answer is private (ephemeral on Discord, the private chat on Telegram): memory is shown
only to its owner, never in a group.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from datetime import datetime

from bot.answers import Answer, Button
from bot.command_line import usage_of
from bot.registry import MEMORIA
from bot.texts import fact_key_label, format_date, format_moment, text
from memory.errors import UserFacingError
from memory.journey.model import CITE
from memory.models import SummaryFields, User
from memory.privacy import FactView, JourneyView, MemoryService, MemoryView, WhyView
from memory.profile.view import FactState

KINDS = ("semantic", "emotional", "episodic")
# The summary's citation codes are for the model (it can follow them); people read dates.
_CITATION = re.compile(r"\s*\{cite:\d+\}")


def _usage(lang: str) -> UserFacingError:
    return UserFacingError(text(lang, "usage", usage=usage_of(MEMORIA, lang)))


def is_heavy(action: str, args: str) -> bool:
    """The /memoria requests under their own rate limit: a confirmed forget, an export."""
    sub = MEMORIA.named(action) if action else None
    confirmed = args.lower().split()[:1] in (["confirmar"], ["confirm"])
    key = sub.key if sub is not None else ""
    return key == "memoria.exportar" or (key == "memoria.olvidar" and confirmed)


def is_forget(action: str) -> bool:
    """/memoria olvidar (in either language)."""
    sub = MEMORIA.named(action) if action else None
    return sub is not None and sub.key == "memoria.olvidar"


def _number(args: list[str], lang: str) -> int:
    digits = args[0].lstrip("#") if args else ""
    # isdecimal: "²" is a digit int() refuses; past 18 digits no id exists (ids are bigints).
    if not digits.isdecimal() or not digits.isascii() or len(digits) > 18:
        raise _usage(lang)
    return int(digits)


def plain_summary(fields: SummaryFields, lang: str) -> list[str]:
    """The rolling summary in plain words: field names people understand, no codes."""
    lines: list[str] = []
    for name, claims in fields.items():
        if claims:
            lines.append(f"{text(lang, f'sum_{name}')}:")
            lines += [f"- {_CITATION.sub('', claim).strip()}" for claim in claims]
    return lines


def _fact_line(item: FactView, lang: str, scope: str = "") -> str:
    fact = item.fact
    line = text(
        lang,
        "mem_fact",
        id=fact.id,
        key=fact_key_label(lang, fact.key),
        value=fact.value,
        origin=text(lang, f"mem_{fact.origin}"),
        date=format_date(lang, fact.confirmed_at),
    )
    if fact.scope.startswith("group:"):  # said in a group, not to the character alone
        line += f" · {text(lang, 'mem_in_this_group' if fact.scope == scope else 'mem_in_a_group')}"
    return f"{line} · {text(lang, 'mem_confirm')}" if item.state is FactState.TO_CONFIRM else line


def _before_line(value: str, until: datetime, lang: str) -> str:
    return text(lang, "mem_before", value=value, date=format_date(lang, until))


def _kinds(views: tuple[FactView, ...], lang: str, scope: str) -> list[str]:
    lines: list[str] = []
    for kind in KINDS:
        facts = [v for v in views if v.fact.kind == kind and v.fact.status == "active"]
        if facts:
            lines.append(f"\n{text(lang, f'mem_kind_{kind}')}")
        for item in facts:
            lines.append(_fact_line(item, lang, scope))
            lines += [f"    {_before_line(o.value, o.superseded_at, lang)}" for o in item.history]
    return lines


def format_view(view: MemoryView, name: str, lang: str, scope: str = "") -> str:
    """The /memoria screen; `scope` is where it is asked from (a group's facts are marked)."""
    usage = text(lang, "usage", usage=usage_of(MEMORIA, lang))
    lines = _kinds(view.facts, lang, scope)
    for other in view.others_in_group:  # the other characters of the group, each apart
        lines += ["", f"{text(lang, 'mem_others_in_group', name=other.name)}:"]
        lines += _kinds(other.facts, lang, scope)
    pending = [v.fact for v in view.facts if v.fact.status == "pending"]
    if pending:
        lines.append(f"\n{text(lang, 'mem_pending')}:")
        lines += [f"#{f.id} {fact_key_label(lang, f.key)}: {f.value}" for f in pending]
    summary = plain_summary(view.summary.fields, lang) if view.summary is not None else []
    if summary:  # a summary with no claim left is no heading
        heading = "mem_summary" if view.summary_current else "mem_summary_past"
        lines += ["", f"{text(lang, heading)}:", *summary]
    if view.journey is not None and view.journey.journey.paragraphs:
        lines += [
            "",
            f"{text(lang, 'story_title', name=name)}:",
            *dated_paragraphs(view.journey, lang),
        ]
    if not lines:  # nothing shown: no title over an empty screen (superseded facts only, say)
        return f"{text(lang, 'mem_none')}\n\n{usage}"
    return "\n".join([f"{text(lang, 'mem_title', name=name)}:", *lines, "", usage])


def format_history(item: FactView, lang: str) -> str:
    """One fact: its value now, then each value it had before, newest first."""
    fact = item.fact
    title = text(lang, "mem_history_title", id=fact.id, key=fact_key_label(lang, fact.key))
    lines = [f"{title}:"]
    lines.append(
        text(
            lang,
            "mem_history_now",
            value=fact.value,
            origin=text(lang, f"mem_{fact.origin}"),
            date=format_date(lang, fact.confirmed_at),
        )
    )
    older = sorted(item.history, key=lambda o: o.superseded_at, reverse=True)
    lines += [_before_line(o.value, o.superseded_at, lang) for o in older]
    if not older:
        lines.append(text(lang, "mem_history_empty"))
    return "\n".join(lines)


def dated_paragraphs(view: JourneyView, lang: str) -> list[str]:
    """The journey's paragraphs with each citation the date of its turn, no codes."""

    def dated(match: re.Match[str]) -> str:
        moment = view.moments.get(int(match.group(1)))
        return f" ({format_date(lang, moment)})" if moment is not None else ""

    # The space before a citation is the date's own: "Getxo {cite:7}." -> "Getxo (2 nov 2026)."
    return [
        _SPACED_CITE.sub(dated, p).replace(" ,", ",").replace(" .", ".")
        for p in view.journey.paragraphs
    ]


_SPACED_CITE = re.compile(r"[ \t]*" + CITE.pattern)


def format_story(view: JourneyView | None, name: str, lang: str) -> str:
    """The journey as people read it: its paragraphs, each citation the date of its turn."""
    if view is None:
        return text(lang, "story_none", name=name)
    paragraphs = dated_paragraphs(view, lang)
    title = text(lang, "story_title", name=name)
    return "\n\n".join([f"{title}:", *paragraphs, text(lang, "story_delete_hint")])


def format_why(why: WhyView | None, name: str, lang: str) -> str:
    if why is None:
        return text(lang, "why_none")
    lines = [text(lang, "why_title", date=format_moment(lang, why.sources.created_at))]
    if why.facts:
        lines += ["", text(lang, "why_facts")]
        lines += [f"- {fact_key_label(lang, f.key)}: {f.value} (#{f.id})" for f in why.facts]
    if why.summary is not None:
        lines += ["", text(lang, "why_summary"), *plain_summary(why.summary.fields, lang)]
    if why.turns:
        lines += ["", text(lang, "why_turns")]
        speakers = {"user": text(lang, "role_user"), "assistant": name}
        for turn in why.turns:
            who = speakers.get(turn.role, text(lang, "role_tool"))
            said = " ".join(turn.text.split())
            said = said if len(said) <= 80 else f"{said[:79]}…"
            lines.append(f"- {format_moment(lang, turn.created_at)}, {who}: {said}")
    lines += _why_journey(why, lang)
    if not (why.facts or why.summary or why.turns or why.sources.journey_id is not None):
        lines.append(text(lang, "why_nothing"))
    return "\n".join(lines)


def _why_journey(why: WhyView, lang: str) -> list[str]:
    if why.journey is not None:
        written = format_date(lang, why.journey.journey.created_at)
        return ["", text(lang, "why_journey", date=written), *dated_paragraphs(why.journey, lang)]
    if why.journey_rewritten:
        return ["", text(lang, "why_journey_rewritten")]
    return []


class Memoria:
    def __init__(self, service: MemoryService) -> None:
        self._service = service

    async def run(
        self,
        user: User,
        character_id: str,
        character_name: str,
        scope: str,
        lang: str,
        action: str,
        args: list[str],
    ) -> Answer:
        """One /memoria subcommand (named in either language) for this user with this
        character."""
        sub = MEMORIA.named(action) if action else MEMORIA.child(MEMORIA.default or "")
        if sub is None:
            raise _usage(lang)
        handlers: dict[str, Callable[[], Awaitable[Answer]]] = {
            "memoria.ver": lambda: self._view(user, character_id, character_name, scope, lang),
            "memoria.corregir": lambda: self._fix(user, character_id, lang, args),
            "memoria.borrar": lambda: self._delete(user, character_id, lang, args),
            "memoria.historial": lambda: self._history(user, character_id, scope, lang, args),
            "memoria.olvidar": lambda: self._ask_forget(
                character_id, character_name, lang, args, user
            ),
            "memoria.exportar": lambda: self._export(user, character_id, character_name, lang),
            "memoria.revisar": lambda: self._review_mode(user, lang, args),
            "memoria.caduca": lambda: self._expire(user, character_id, lang, args),
            "memoria.porque": lambda: self._why(user, character_id, character_name, lang),
            "memoria.historia": lambda: self._story(user, character_id, character_name, lang, args),
        }
        answer = await handlers[sub.key]()
        return Answer(
            answer.text or text(lang, "mem_none"),
            ok=answer.ok,
            private=True,
            buttons=answer.buttons,
            document=answer.document,
        )

    async def _view(
        self, user: User, character_id: str, name: str, scope: str, lang: str
    ) -> Answer:
        view = await self._service.view(user, character_id, scope)
        buttons = tuple(
            button
            for v in view.facts
            if v.fact.status == "pending"
            for button in (
                Button(f"{text(lang, 'mem_accept')} #{v.fact.id}", f"mem:accept:{v.fact.id}"),
                Button(f"{text(lang, 'mem_reject')} #{v.fact.id}", f"mem:reject:{v.fact.id}"),
            )
        )
        return Answer(format_view(view, name, lang, scope), buttons=buttons)

    async def _history(
        self, user: User, character_id: str, scope: str, lang: str, args: list[str]
    ) -> Answer:
        number = _number(args, lang)
        view = await self._service.view(user, character_id, scope)
        item = next((v for v in view.facts if v.fact.id == number), None)
        if item is None:
            raise UserFacingError(text(lang, "no_fact", id=number))
        return Answer(format_history(item, lang))

    async def _fix(self, user: User, character_id: str, lang: str, args: list[str]) -> Answer:
        number = _number(args, lang)
        if len(args) < 2:
            raise _usage(lang)
        fact = await self._service.correct(user, character_id, number, " ".join(args[1:]))
        return Answer(
            text(
                lang, "mem_fixed", id=fact.id, key=fact_key_label(lang, fact.key), value=fact.value
            )
        )

    async def _delete(self, user: User, character_id: str, lang: str, args: list[str]) -> Answer:
        number = _number(args, lang)
        await self._service.delete(user, character_id, number)
        return Answer(text(lang, "mem_deleted", id=number))

    async def _ask_forget(
        self, character_id: str, name: str, lang: str, args: list[str], user: User
    ) -> Answer:
        if args and args[0].lower() in ("confirmar", "confirm"):
            return await self.forget(user, character_id, name, lang)
        return Answer(
            text(lang, "mem_ask_forget", name=name),
            buttons=(
                Button(text(lang, "mem_yes"), f"mem:forget:{character_id}"),
                Button(text(lang, "mem_no"), "mem:cancel"),
            ),
        )

    async def forget(self, user: User, character_id: str, name: str, lang: str) -> Answer:
        await self._service.forget(user, character_id)
        return Answer(text(lang, "mem_forgotten", name=name), private=True)

    async def _export(self, user: User, character_id: str, name: str, lang: str) -> Answer:
        data = await self._service.export(user, character_id)
        payload = json.dumps(data, ensure_ascii=False, indent=1).encode()
        return Answer(
            text(lang, "mem_export", name=name),
            document=(f"memoria-{character_id}.json", payload),
        )

    async def _review_mode(self, user: User, lang: str, args: list[str]) -> Answer:
        if not args or args[0].lower() not in ("on", "off", "si", "sí", "no"):
            raise _usage(lang)
        on = args[0].lower() in ("on", "si", "sí")
        await self._service.set_review_mode(user, on)
        return Answer(text(lang, "mem_review_on" if on else "mem_review_off"))

    async def review(
        self, user: User, character_id: str, lang: str, fact_id: int, accept: bool
    ) -> Answer:
        await self._service.review(user, character_id, fact_id, accept)
        key = "mem_accepted" if accept else "mem_rejected"
        return Answer(text(lang, key, id=fact_id), private=True)

    async def _expire(self, user: User, character_id: str, lang: str, args: list[str]) -> Answer:
        number = _number(args, lang)
        if len(args) < 2:
            raise _usage(lang)
        fact = await self._service.expire(user, character_id, number, args[1])
        never = text(lang, "mem_never")
        when = format_date(lang, fact.expires_at) if fact.expires_at else never
        return Answer(text(lang, "mem_expire", id=fact.id, when=when))

    async def _why(self, user: User, character_id: str, name: str, lang: str) -> Answer:
        return Answer(format_why(await self._service.why(user, character_id), name, lang))

    async def _story(
        self, user: User, character_id: str, name: str, lang: str, args: list[str]
    ) -> Answer:
        action = args[0].lower() if args else "ver"
        if action in ("borrar", "delete"):
            deleted = await self._service.delete_journey(user, character_id)
            return Answer(text(lang, "story_deleted" if deleted else "story_nothing", name=name))
        if action not in ("ver", "show"):
            raise _usage(lang)
        return Answer(format_story(await self._service.journey(user, character_id), name, lang))

    def cancelled(self, lang: str) -> Answer:
        return Answer(text(lang, "mem_cancelled"), private=True)

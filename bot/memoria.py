"""/memoria: parse the subcommand, call the MemoryService, and word the answer.

Every answer is private (ephemeral on Discord, the private chat on Telegram): memory is shown
only to its owner, never in a group.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from bot.answers import Answer, Button
from memory.errors import UserFacingError
from memory.models import User
from memory.privacy import MemoryService, MemoryView, WhyView
from memory.profile import FactState
from memory.prompt import format_summary

ACTIONS = {
    "ver": "view",
    "view": "view",
    "corregir": "fix",
    "fix": "fix",
    "borrar": "delete",
    "delete": "delete",
    "olvidar": "forget",
    "forget": "forget",
    "exportar": "export",
    "export": "export",
    "revisar": "review",
    "review": "review",
    "caduca": "expire",
    "expire": "expire",
    "porque": "why",
    "why": "why",
    "historial": "history",
    "history": "history",
}
KIND_NAMES = {
    "es": {
        "semantic": "Quién eres",
        "emotional": "Cómo te sientes",
        "episodic": "Lo que te ha pasado",
    },
    "en": {
        "semantic": "Who you are",
        "emotional": "How you feel",
        "episodic": "What happened to you",
    },
}
USAGE = {
    "es": "Uso: /memoria ver | corregir N valor | borrar N | caduca N 30d | historial N | "
    "olvidar | exportar | revisar on|off | porque",
    "en": "Usage: /memoria view | fix N value | delete N | expire N 30d | history N | "
    "forget | export | review on|off | why",
}
WORDS = {
    "es": {
        "stated": "contado por ti",
        "inferred": "deducido",
        "imported": "importado",
        "confirm": "por confirmar",
        "pending": "pendiente de tu revisión",
        "none": "No recuerdo nada de ti todavía.",
        "title": "Lo que {name} recuerda de ti",
        "fixed": "Corregido: #{id} {key} = {value}.",
        "deleted": "Borrado #{id}.",
        "ask_forget": "¿Borro TODO lo que {name} sabe de ti (conversaciones, resúmenes, "
        "datos)? No se puede deshacer.",
        "yes": "Sí, borrar todo",
        "no": "Cancelar",
        "forgotten": "Hecho: {name} te ha olvidado por completo.",
        "cancelled": "Cancelado.",
        "review_on": "Modo revisión activado: los datos nuevos esperarán tu visto bueno.",
        "review_off": "Modo revisión desactivado.",
        "accept": "Aceptar",
        "reject": "Rechazar",
        "accepted": "Aceptado #{id}.",
        "rejected": "Rechazado y borrado #{id}.",
        "expire": "#{id} caduca ahora: {when}.",
        "never": "nunca",
        "why_none": "Todavía no te he contestado nada.",
        "history": "antes",
        "until": "hasta",
        "export": "Aquí tienes todo lo que {name} recuerda de ti.",
        "limited": "Demasiadas peticiones de borrado o exportación seguidas. "
        "Vuelve a probar dentro de {seconds} s.",
    },
    "en": {
        "stated": "told by you",
        "inferred": "inferred",
        "imported": "imported",
        "confirm": "to confirm",
        "pending": "waiting for your review",
        "none": "I don't remember anything about you yet.",
        "title": "What {name} remembers about you",
        "fixed": "Fixed: #{id} {key} = {value}.",
        "deleted": "Deleted #{id}.",
        "ask_forget": "Delete EVERYTHING {name} knows about you (conversations, summaries, "
        "facts)? This cannot be undone.",
        "yes": "Yes, delete all",
        "no": "Cancel",
        "forgotten": "Done: {name} has forgotten you completely.",
        "cancelled": "Cancelled.",
        "review_on": "Review mode on: new facts will wait for your approval.",
        "review_off": "Review mode off.",
        "accept": "Accept",
        "reject": "Reject",
        "accepted": "Accepted #{id}.",
        "rejected": "Rejected and deleted #{id}.",
        "expire": "#{id} now expires: {when}.",
        "never": "never",
        "why_none": "I haven't answered you yet.",
        "history": "before",
        "until": "until",
        "export": "Here is everything {name} remembers about you.",
        "limited": "Too many forget or export requests in a row. Try again in {seconds} s.",
    },
}


def is_heavy(action: str, args: str) -> bool:
    """The /memoria requests under their own rate limit: a confirmed forget, an export."""
    kind = ACTIONS.get(action.lower())
    confirmed = args.lower().split()[:1] in (["confirmar"], ["confirm"])
    return kind == "export" or (kind == "forget" and confirmed)


def memoria_limited(lang: str, seconds: int) -> str:
    return WORDS[lang]["limited"].format(seconds=seconds)


def _number(args: list[str], lang: str) -> int:
    if not args or not args[0].lstrip("#").isdigit():
        raise UserFacingError(USAGE[lang])
    return int(args[0].lstrip("#"))


def format_view(view: MemoryView, name: str, lang: str) -> str:
    words = WORDS[lang]
    if not view.facts and view.summary is None:
        return f"{words['none']}\n\n{USAGE[lang]}"
    lines = [f"{words['title'].format(name=name)}:"]
    for kind, title in KIND_NAMES[lang].items():
        facts = [v for v in view.facts if v.fact.kind == kind and v.fact.status == "active"]
        if facts:
            lines.append(f"\n{title}")
        for item in facts:
            fact = item.fact
            flag = f" · {words['confirm']}" if item.state is FactState.TO_CONFIRM else ""
            when = fact.confirmed_at.date().isoformat()
            lines.append(
                f"#{fact.id} {fact.key}: {fact.value} — {words[fact.origin]}, {when}{flag}"
            )
            for old in item.history:
                lines.append(
                    f"    {words['history']}: {old.value} ({words['until']} "
                    f"{old.superseded_at.date().isoformat()})"
                )
    pending = [v.fact for v in view.facts if v.fact.status == "pending"]
    if pending:
        lines.append(f"\n{words['pending'].capitalize()}:")
        lines += [f"#{f.id} {f.key}: {f.value}" for f in pending]
    if view.summary is not None:
        lines += ["", format_summary(view.summary.fields, lang)]
    lines += ["", USAGE[lang]]
    return "\n".join(lines)


def format_why(why: WhyView | None, lang: str) -> str:
    if why is None:
        return WORDS[lang]["why_none"]
    lines = [f"turn #{why.sources.turn_id} ({why.sources.created_at:%Y-%m-%d %H:%M})"]
    lines += [f"fact #{f.id} {f.key}: {f.value}" for f in why.facts]
    if why.summary is not None:
        lines.append(format_summary(why.summary.fields, lang))
    lines += [f"[{t.id}] {t.created_at:%Y-%m-%d %H:%M} {t.role}: {t.text[:80]}" for t in why.turns]
    return "\n".join(lines)


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
        """One /memoria subcommand for this user with this character."""
        words = WORDS[lang]
        kind = ACTIONS.get(action.lower() or "ver")
        handlers: dict[str, Callable[[], Awaitable[Answer]]] = {
            "view": lambda: self._view(user, character_id, character_name, scope, lang),
            "fix": lambda: self._fix(user, character_id, lang, args),
            "delete": lambda: self._delete(user, character_id, lang, args),
            "history": lambda: self._view(user, character_id, character_name, scope, lang),
            "forget": lambda: self._ask_forget(character_id, character_name, lang, args, user),
            "export": lambda: self._export(user, character_id, character_name, lang),
            "review": lambda: self._review_mode(user, lang, args),
            "expire": lambda: self._expire(user, character_id, lang, args),
            "why": lambda: self._why(user, character_id, lang),
        }
        if kind is None:
            raise UserFacingError(USAGE[lang])
        answer = await handlers[kind]()
        return Answer(
            answer.text or words["none"],
            ok=answer.ok,
            private=True,
            buttons=answer.buttons,
            document=answer.document,
        )

    async def _view(
        self, user: User, character_id: str, name: str, scope: str, lang: str
    ) -> Answer:
        view = await self._service.view(user, character_id, scope)
        words = WORDS[lang]
        buttons = tuple(
            button
            for v in view.facts
            if v.fact.status == "pending"
            for button in (
                Button(f"{words['accept']} #{v.fact.id}", f"mem:accept:{v.fact.id}"),
                Button(f"{words['reject']} #{v.fact.id}", f"mem:reject:{v.fact.id}"),
            )
        )
        return Answer(format_view(view, name, lang), buttons=buttons)

    async def _fix(self, user: User, character_id: str, lang: str, args: list[str]) -> Answer:
        number = _number(args, lang)
        if len(args) < 2:
            raise UserFacingError(USAGE[lang])
        fact = await self._service.correct(user, character_id, number, " ".join(args[1:]))
        return Answer(WORDS[lang]["fixed"].format(id=fact.id, key=fact.key, value=fact.value))

    async def _delete(self, user: User, character_id: str, lang: str, args: list[str]) -> Answer:
        number = _number(args, lang)
        await self._service.delete(user, character_id, number)
        return Answer(WORDS[lang]["deleted"].format(id=number))

    async def _ask_forget(
        self, character_id: str, name: str, lang: str, args: list[str], user: User
    ) -> Answer:
        words = WORDS[lang]
        if args and args[0].lower() in ("confirmar", "confirm"):
            return await self.forget(user, character_id, name, lang)
        return Answer(
            words["ask_forget"].format(name=name),
            buttons=(
                Button(words["yes"], f"mem:forget:{character_id}"),
                Button(words["no"], "mem:cancel"),
            ),
        )

    async def forget(self, user: User, character_id: str, name: str, lang: str) -> Answer:
        await self._service.forget(user, character_id)
        return Answer(WORDS[lang]["forgotten"].format(name=name), private=True)

    async def _export(self, user: User, character_id: str, name: str, lang: str) -> Answer:
        data = await self._service.export(user, character_id)
        payload = json.dumps(data, ensure_ascii=False, indent=1).encode()
        return Answer(
            WORDS[lang]["export"].format(name=name),
            document=(f"memoria-{character_id}.json", payload),
        )

    async def _review_mode(self, user: User, lang: str, args: list[str]) -> Answer:
        if not args or args[0].lower() not in ("on", "off", "si", "sí", "no"):
            raise UserFacingError(USAGE[lang])
        on = args[0].lower() in ("on", "si", "sí")
        await self._service.set_review_mode(user, on)
        return Answer(WORDS[lang]["review_on" if on else "review_off"])

    async def review(
        self, user: User, character_id: str, lang: str, fact_id: int, accept: bool
    ) -> Answer:
        await self._service.review(user, character_id, fact_id, accept)
        key = "accepted" if accept else "rejected"
        return Answer(WORDS[lang][key].format(id=fact_id), private=True)

    async def _expire(self, user: User, character_id: str, lang: str, args: list[str]) -> Answer:
        number = _number(args, lang)
        if len(args) < 2:
            raise UserFacingError(USAGE[lang])
        fact = await self._service.expire(user, character_id, number, args[1])
        when = fact.expires_at.date().isoformat() if fact.expires_at else WORDS[lang]["never"]
        return Answer(WORDS[lang]["expire"].format(id=fact.id, when=when))

    async def _why(self, user: User, character_id: str, lang: str) -> Answer:
        return Answer(format_why(await self._service.why(user, character_id), lang))

    def cancelled(self, lang: str) -> Answer:
        return Answer(WORDS[lang]["cancelled"], private=True)

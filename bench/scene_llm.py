"""The fake model of bench/scene.py: each character answers in its own voice, picking up the
topic of the message it answers and now and then handing the word to another character by
name; summaries are bench/scripted_llm.py's; the scene's extraction records each person's
own facts and, on purpose, what others said about them (which the product must refuse).

Like bench/scripted_llm.py it converts every request to the exact Anthropic body, runs it
through the prompt-cache simulator at the fake clock's time and reports those figures as the
usage; every request is kept with the character it is for and the human message under way.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bench.cache_sim import CacheResult, PromptCache
from bench.scene_chronicle import BenchChronicler
from bench.scene_script import CAST, TOPICS, Claim, Role, contract
from bench.scripted_llm import BENCH_MODEL, BenchClock, body_tokens, parse_turns
from bot.llm.anthropic_provider import request_body
from memory.engine.llm import LLMError, LLMRequest, LLMResponse, ToolCall, Usage
from memory.engine.tokens import TokenEstimator
from memory.journey.chronicler import JOURNEY_TOOL
from memory.profile.extraction import EXTRACTION_TOOL
from memory.scene.voices import voices_in
from memory.summary.rolling import SUMMARY_TOOL

HANDOFF_SHARE = 0.3  # of a character's lines: it names another character present
GROUP_LINE = re.compile(r"^\[(\d+)\] \S+ \S+ (<(?:person|character) .*)$")
PERSON = re.compile(r"^Current profile of (.+?):$", re.MULTILINE)

VOICES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], str]] = {
    # openers, middles (with the topic), closers, hand-off (with the other's first name)
    "detective_bilbao": (
        ("Ya te digo.", "Aibalaostia.", "Mal asunto.", "Lo apunto.", "Despacio.",
         "No me cuadra.", "Eso huele raro.", "Vale."),
        ("Lo de {t} tiene más miga de lo que parece.", "Con {t} nadie cuenta la verdad entera.",
         "Lo de {t} lo vi venir hace semanas.", "De {t} sé lo que sale en el periódico.",
         "Sobre {t}, la libreta dice otra cosa."),
        ("¿Quién lo vio primero?", "¿A qué hora fue?", "¿Quién gana con eso?",
         "Mañana bajo a preguntar.", "Sin prisas.", "No me lo creo del todo.",
         "Los detalles, siempre los detalles.", "Ya hablaremos."),
        "Pregúntale a {o}, sabe más que yo.",
    ),
    "lighthouse_keeper": (
        ("Oh, love.", "Well now.", "Goodness.", "Tea first.", "Ah.", "Bless you.",
         "Mind the wind.", "Right then."),
        ("What you say of {t} reminds me of fog rolling past the lamp.",
         "I heard about {t} at the shop this morning.",
         "{t} sounds like a story for the window display.",
         "Biscuit the cat slept through all the talk of {t}.",
         "The gulls were loud while I read about {t}."),
        ("How are you holding up?", "Did you sleep at all?", "What did you make of it?",
         "Write it down before it fades.", "The kettle's on if you need it.",
         "Small steps, love.", "Tell me how you feel about it.", "We'll see it through."),
        "{o} might know more than I do.",
    ),
    "tabernera": (
        ("¡Aupa!", "¡Ay, chico!", "Madre mía.", "¡Qué me dices!", "Mira tú.", "¡Anda ya!",
         "Escucha.", "Pues sí."),
        ("Lo de {t} ya se comenta en la barra.", "De {t} me enteré antes que nadie.",
         "Con {t} el bar no para de hablar.", "Lo de {t} me lo contó un cliente fijo.",
         "Sobre {t} tengo mi teoría."),
        ("¿Te pongo un zurito?", "¿Quién te lo ha contado?", "¿Otra ronda?",
         "Aquí se sabe todo.", "Ya verás cómo acaba.", "No digas que te lo dije yo.",
         "¿Unos pintxos mientras?", "Hoy invita la casa."),
        "{o}, tú que lo sabes todo, cuéntalo.",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class SceneRequest:
    kind: str
    character: str | None  # the character id the request is for (its sheet or its name)
    message: int  # the human message under way when it was made
    body: dict[str, Any]
    tokens: int
    cache: CacheResult
    at: datetime

    def text(self) -> str:
        """Every text the request carries, as one string (for searching it)."""
        return json.dumps(self.body, ensure_ascii=False)


def character_of(request: LLMRequest) -> str | None:
    """The character a request is for: the first line of a reply's sheet names it; the
    summary's and extraction's instructions name it."""
    system = request.system[0].text if request.system else ""
    head = system.split("\n", 1)[0] if request.kind == "reply" else system
    return next((role.id for role in CAST if role.name in head), None)


class SceneLLM:
    def __init__(
        self,
        clock: BenchClock,
        tokens: TokenEstimator,
        cache: PromptCache,
        claims: dict[str, Claim],
        mixed: frozenset[str],
        seed: int,
        latency: timedelta = timedelta(seconds=6),
    ) -> None:
        self._clock = clock
        self._tokens = tokens
        self._cache = cache
        self._claims = claims  # line text -> what it says about whom (script's fact lines)
        self._mixed = mixed  # hearsay lines cited together with the person's own line
        self._rng = random.Random(seed)
        self._latency = latency
        self._said: set[str] = set()
        self.requests: list[SceneRequest] = []
        self.present: tuple[Role, ...] = ()
        self.topic = ""
        self.message = 0
        self.foreign_attempts = 0  # operations it proposed about a person on others' words
        self.chronicler = BenchChronicler()  # each character's story of the scene

    async def close(self) -> None:
        return None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        body = request_body(request, BENCH_MODEL)
        now = self._clock()
        cache = self._cache.request(body, now, self._tokens.count)
        character = character_of(request)
        tokens = body_tokens(body, self._tokens)
        self.requests.append(
            SceneRequest(request.kind, character, self.message, body, tokens, cache, now)
        )
        text, calls = "", ()
        if request.kind == "reply" and character is not None:
            text = self.line(character)
            self._clock.advance(self._latency)
        elif request.kind == "summary":
            folded = parse_turns(request.messages[-1].text, "Turns to fold in:\n")
            language = next((r.language for r in CAST if r.id == character), "es")
            calls = (ToolCall(SUMMARY_TOOL.name, scene_summary(folded, language), "bench"),)
        elif request.kind == "extraction":
            arguments = self.extraction(request.messages[-1].text)
            calls = (ToolCall(EXTRACTION_TOOL.name, arguments, "bench"),)
        elif request.kind == "journey" and character is not None:
            story = self.chronicler.answer(character, request.messages[-1].text)
            calls = (ToolCall(JOURNEY_TOOL.name, {"journey": story}, "bench"),)
        else:  # anything else is not scripted
            raise LLMError(f"the bench has no script for '{request.kind}' requests")
        output = text or json.dumps([c.arguments for c in calls], ensure_ascii=False)
        usage = Usage(
            input_tokens=cache.uncached,
            cache_read_tokens=cache.read,
            cache_write_tokens=cache.write,
            output_tokens=self._tokens.count(output),
        )
        return LLMResponse(text=text, model=BENCH_MODEL, usage=usage, tool_calls=calls)

    def line(self, character: str) -> str:
        """A new line in the character's voice about the topic under way; with HANDOFF_SHARE
        it ends naming another character present instead of its closer."""
        openers, middles, closers, handoff = VOICES[character]
        others = [r for r in self.present if r.id != character]
        for _ in range(500):
            middle = self._rng.choice(middles).format(t=self.topic)
            end = self._rng.choice(closers)
            if others and self._rng.random() < HANDOFF_SHARE:
                end = handoff.format(o=self._rng.choice(others).first)
            text = contract(f"{self._rng.choice(openers)} {middle[0].upper()}{middle[1:]} {end}")
            if text not in self._said:
                self._said.add(text)
                return text
        raise RuntimeError(f"{character} ran out of unique lines")

    def extraction(self, text: str) -> dict[str, Any]:
        """record_profile for the person the request is about: each of their own fact lines,
        and, on purpose, each line in which someone else speaks about them (cited alone, or
        with one of the person's own lines when the script marks it mixed)."""
        found = PERSON.search(text)
        person = found.group(1) if found else ""
        _, _, turns = text.partition("Group turns:\n")
        matches = [m.groups() for m in map(GROUP_LINE.match, turns.splitlines()) if m]
        lines = [
            (turn_id, who, said) for turn_id, line in matches for _, who, said in voices_in(line)
        ]
        own = [int(turn_id) for turn_id, who, _ in lines if who == person]
        operations: list[dict[str, Any]] = []
        for turn_id, who, said in lines:
            claim = self._claims.get(said)
            if claim is None or claim.about != person:
                continue
            evidence = [int(turn_id)]
            if who != person:
                self.foreign_attempts += 1
                if said in self._mixed:
                    evidence = [*own[:1], *evidence]
            operations.append(_add(claim, evidence))
        return {"operations": operations}


# What a summariser writes of a scene, by language: the topics talked about (the summariser
# writes the topics only, though format_turns puts every line not the character's own in its
# speaker's container), how lively the group is, the tone and what is left open.
_SUMMARY_WORDS = {
    "es": ("En el grupo se habló de {t}", "El grupo sigue animado: {n} intervenciones más",
           "cercano y atento a todo el grupo", "Queda en el aire lo de {t}"),
    "en": ("The group talked about {t}", "The group is lively: {n} more lines",
           "warm and attentive to everyone in the group", "Still open: {t}"),
}  # fmt: skip


def topic_in(text: str) -> str | None:
    """The script's topic a line speaks of (its article aside: "del faro" is "el faro")."""
    for topic in TOPICS:
        if topic.split(" ", 1)[1] in text:
            return topic
    return None


def scene_summary(folded: list[tuple[int, str, str]], language: str) -> dict[str, list[str]]:
    """A plausible, deterministic write_summary call for a scene: one cited claim per topic."""
    said = [(turn_id, text) for turn_id, role, text in folded if role == "user"]
    if not said:
        return {name: [] for name in SUMMARY_TOOL.input_schema["required"]}
    talked, lively, tone, still = _SUMMARY_WORDS.get(language, _SUMMARY_WORDS["en"])
    topics = [(i, t) for i, text in said if (t := topic_in(text)) is not None]
    last_id, last_any = said[-1][0], folded[-1][0]
    return {
        "established_facts": [contract(talked.format(t=t)) + f" {{cite:{i}}}" for i, t in topics],
        "relationship": [lively.format(n=len(said)) + f" {{cite:{last_id}}}"],
        "commitments": [],
        "tone": [f"{tone} {{cite:{last_any}}}"],
        "open_threads": [contract(still.format(t=t)) + f" {{cite:{i}}}" for i, t in topics[-1:]],
        "canon": [],
    }


def _add(claim: Claim, evidence: list[int]) -> dict[str, Any]:
    return {
        "op": "add",
        "kind": claim.kind,
        "key": claim.key,
        "value": claim.value,
        "origin": "stated",
        "evidence": evidence,
    }

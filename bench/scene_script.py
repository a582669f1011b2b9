"""The scripted scene of bench/scene.py: four people in a group with three characters, the
third joining midway. Pure and seeded: the same arguments give the same messages.

Every text is unique in the run (a line said before the third character joined is then
found in its prompts only if it leaked there), and each message is one of five kinds:
- named: it names one present character (now and then two), who answers;
- nobody: it names no character (sent as a mention of the bot): the routing's fallback answers;
- reply: a reply to the latest character line (no name in it);
- fact: the speaker says something about themself (`Claim`, their own words);
- hearsay: the speaker says something about another person present; the fake model records
  it about that person on purpose, and the product must refuse it.
Idle gaps longer than the inactivity timeout split the run into conversations, so the
scene's extraction runs after each one.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

MessageKind = Literal["named", "nobody", "reply", "fact", "hearsay"]
FACT_EVERY, FACT_AT = 19, 5  # a fact line at message i when i % 19 == 5
HEARSAY_EVERY, HEARSAY_AT = 23, 11
SHARES = (("named", 0.55), ("nobody", 0.25), ("reply", 0.20))  # of the other messages
TWO_NAMED = 0.12  # of the named messages: two characters named (both answer, the cap is 2)
SPEAKER_WEIGHTS = (0.32, 0.26, 0.24, 0.18)  # some people talk more than others
IDLE_GAP = timedelta(hours=3)  # longer than the inactivity timeout: the conversation ends


@dataclass(frozen=True)
class Person:
    user_id: str  # the platform's user id
    name: str


@dataclass(frozen=True)
class Role:
    """A character of the scene, as the script and the fake model know it."""

    id: str
    name: str  # its full name (the sheet's first line)
    first: str  # what people call it in the group
    language: str = "es"


PEOPLE = (Person("501", "Ana"), Person("502", "Bea"), Person("503", "Bob"), Person("504", "Carlos"))
KOLDO = Role("detective_bilbao", "Koldo Arrieta", "Koldo")
MAGGIE = Role("lighthouse_keeper", "Maggie Thornton", "Maggie", "en")
ITZIAR = Role("tabernera", "Itziar Goikoetxea", "Itziar")
CAST = (KOLDO, MAGGIE, ITZIAR)
FIRST_CAST, LATE = (KOLDO, MAGGIE), ITZIAR


@dataclass(frozen=True)
class Claim:
    """What a line says about a person: the fact a model would take from it."""

    about: str  # the person's name
    key: str
    value: str
    kind: str = "semantic"


# Each person's own facts, each said once, in their own words.
OWN_FACTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "Ana": (
        ("job", "enfermera en Cruces", "Trabajo de enfermera en Cruces, turno de noche."),
        ("city", "Barakaldo", "Yo vivo en Barakaldo, al lado del BEC."),
        ("pets", "un perro llamado Txuri", "Tengo un perro llamado Txuri, ladra a todo."),
        ("hobbies", "el remo", "Los domingos hago remo en la ría, me encanta."),
    ),
    "Bea": (
        ("job", "profesora de química", "Soy profesora de química en un instituto."),
        ("city", "Getxo", "Vivo en Getxo desde hace diez años."),
        ("likes", "el jazz", "Me encanta el jazz, voy a todos los conciertos que puedo."),
        ("pets", "dos gatos", "Tengo dos gatos que se llaman Ron y Miel."),
    ),
    "Bob": (
        ("job", "cocinero en un asador", "Trabajo de cocinero en un asador de Deusto."),
        ("city", "Deusto", "Vivo en Deusto, cerca de la universidad."),
        ("hobbies", "la pesca", "Mi afición es la pesca, salgo al amanecer los sábados."),
        ("diet", "vegetariano", "Soy vegetariano desde hace tres años."),
    ),
    "Carlos": (
        ("job", "taxista", "Yo soy taxista, hago el turno de tarde."),
        ("city", "Santutxu", "Vivo en Santutxu, en un quinto sin ascensor."),
        ("hobbies", "el ajedrez", "Juego al ajedrez en el club del barrio los jueves."),
        ("likes", "el Athletic", "Soy del Athletic a muerte, tengo abono en San Mamés."),
    ),
}
# What someone says about another person: never to be remembered as that person's fact.
# (about, key, value, the line); keys none of the person's own facts use.
HEARSAY = (
    ("Ana", "age", "12", "Ana me dijo que tiene 12 años, no os lo vais a creer."),
    ("Bea", "partner", "un bombero de Leioa", "Bea me contó que sale con un bombero de Leioa."),
    ("Bob", "health", "operado de la rodilla", "Me han dicho que Bob está operado de la rodilla."),
    ("Carlos", "family", "tres hermanas en Durango", "Carlos tiene tres hermanas en Durango."),
    ("Ana", "family", "una hermana en Londres", "Ana tiene una hermana en Londres, me lo contó."),
    ("Bea", "age", "58", "Bea me confesó que tiene 58 años, quién lo diría."),
    ("Bob", "partner", "una cantante de Sestao", "Bob sale con una cantante de Sestao, fijo."),
    ("Carlos", "health", "diabético", "Carlos es diabético, me lo dijo su primo."),
)

TOPICS = (
    "la caja fuerte del bar", "el perro perdido de la calle Somera", "la lancha del puerto",
    "el concierto de la plaza Nueva", "el robo en la ferretería", "las obras del tranvía",
    "la lluvia de esta semana", "las fiestas de Aste Nagusia", "el libro que perdió Bea",
    "la llave del trastero", "el gato de la vecina del tercero", "el mercado de la Ribera",
    "la tormenta del jueves", "el partido del sábado", "la carta sin remitente",
    "el coche mal aparcado en la esquina", "la subida del alquiler", "el faro apagado",
    "la receta de bacalao al pil-pil", "el vecino que toca la trompeta",
)  # fmt: skip
QUESTIONS = (
    "¿qué opinas de {t}?", "¿te acuerdas de {t}?", "¿has oído lo de {t}?",
    "cuéntanos algo de {t}.", "¿qué harías tú con {t}?", "¿quién crees que está detrás de {t}?",
    "¿a ti también te preocupa {t}?", "dime la verdad sobre {t}.",
    "¿cómo acabó lo de {t}?", "¿tú sabías lo de {t}?",
)  # fmt: skip
OPEN_TALK = (
    "Oye, ¿alguien sabe algo de {t}?", "No paro de pensar en {t}.",
    "Lo de {t} me tiene mosca.", "¿Y qué pasó al final con {t}?",
    "Hoy en el trabajo solo se hablaba de {t}.", "Me he acordado de {t} esta mañana.",
    "¿Nadie va a decir nada de {t}?", "Qué cosas, lo de {t}.",
    "Ayer vi algo raro relacionado con {t}.", "Yo de {t} no me fío nada.",
)  # fmt: skip
REPLIES = (
    "¿Y eso por qué lo dices? Lo pregunto por {t}.", "No estoy de acuerdo, y menos con {t}.",
    "Ja, eso mismo pensé yo de {t}.", "¿En serio? Pues con {t} me pasó igual.",
    "Explícate mejor, que con {t} me pierdo.", "Tienes razón, {t} fue un desastre.",
    "Eso no me lo esperaba de {t}.", "Vale, pero {t} es otra historia.",
    "Me has convencido a medias con {t}.", "¿Seguro? Yo lo de {t} lo recuerdo distinto.",
)  # fmt: skip


@dataclass(frozen=True)
class HumanMessage:
    index: int  # 1-based: human message number
    person: Person
    text: str
    kind: MessageKind
    topic: str  # what the characters' lines pick up
    gap: timedelta  # since the previous message (or the previous message's last line)
    opens_conversation: bool
    claim: Claim | None = None  # fact and hearsay lines: what the line says, about whom
    mixed: bool = False  # hearsay the fake model cites together with the person's own line


@dataclass(frozen=True)
class SceneScript:
    messages: tuple[HumanMessage, ...]
    join_at: int  # the third character joins just before this message

    def present_at(self, index: int) -> tuple[Role, ...]:
        return CAST if index >= self.join_at else FIRST_CAST


def contract(text: str) -> str:
    """Spanish spelling: "de el" is "del", "a el" is "al"."""

    def joined(match: re.Match[str]) -> str:
        word = "del" if match.group(1).lower() == "de" else "al"
        return word.capitalize() if match.group(1)[0].isupper() else word

    return re.sub(r"\b(de|a) el\b", joined, text, flags=re.IGNORECASE)


def addressed_to(name: str, line: str) -> str:
    """The line said to a character by name: "Koldo, trabajo de..." (a person's name that
    opens the line keeps its capital)."""
    first = line.split()[0].strip(",")
    if first in {p.name for p in PEOPLE}:
        return f"{name}, {line}"
    return f"{name}, {line[0].lower()}{line[1:]}"


class _Unique:
    """Draws texts from templates, never one that holds a text drawn before or is held in
    one: a line said before the third character joined is then found in its prompts only if
    that very line is there, not because a later line repeats it with a name in front."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self.used: list[str] = []

    def fresh(self, text: str) -> bool:
        return not any(text in old or old in text for old in self.used)

    def draw(self, templates: tuple[str, ...], prefix: str = "") -> tuple[str, str]:
        for _ in range(200):
            topic = self._rng.choice(TOPICS)
            text = contract(prefix + self._rng.choice(templates).format(t=topic))
            if self.fresh(text):
                self.used.append(text)
                return text, topic
        raise RuntimeError("the templates ran out of unique texts")


def build_script(
    messages: int = 300,
    seed: int = 7,
    conversation_length: int = 50,
    join_at: int | None = None,
    gaps: tuple[int, int] = (20, 70),
) -> SceneScript:
    """`gaps`: the seconds between two messages of a conversation, drawn uniformly."""
    rng = random.Random(seed)
    unique = _Unique(rng)
    join = join_at if join_at is not None else messages // 2 + 1
    owed = {name: list(facts) for name, facts in OWN_FACTS.items()}
    out: list[HumanMessage] = []
    for index in range(1, messages + 1):
        present = CAST if index >= join else FIRST_CAST
        opens = (index - 1) % conversation_length == 0
        gap = IDLE_GAP if opens and index > 1 else timedelta(seconds=rng.randint(*gaps))
        fields = _message(index, rng, unique, present, owed)
        out.append(HumanMessage(index=index, gap=gap, opens_conversation=opens, **fields))
    return SceneScript(tuple(out), join)


def _message(
    index: int,
    rng: random.Random,
    unique: _Unique,
    present: tuple[Role, ...],
    owed: dict[str, list[tuple[str, str, str]]],
) -> dict[str, object]:
    """The fields of message `index` but its place in time."""
    if index % FACT_EVERY == FACT_AT:
        fact = _fact_line(index, rng, unique, present, owed)
        if fact is not None:
            return fact
    if index % HEARSAY_EVERY == HEARSAY_AT:
        return _hearsay_line(index, rng, unique, present)
    person = rng.choices(PEOPLE, weights=SPEAKER_WEIGHTS, k=1)[0]
    kind = rng.choices([k for k, _ in SHARES], weights=[w for _, w in SHARES], k=1)[0]
    if kind == "named":
        named = rng.sample(present, 2 if rng.random() < TWO_NAMED else 1)
        prefix = " y ".join(r.first for r in named) + ", "
        text, topic = unique.draw(QUESTIONS, prefix)
    else:
        text, topic = unique.draw(OPEN_TALK if kind == "nobody" else REPLIES)
    return {"person": person, "text": text, "kind": kind, "topic": topic}


def _fact_line(
    index: int,
    rng: random.Random,
    unique: _Unique,
    present: tuple[Role, ...],
    owed: dict[str, list[tuple[str, str, str]]],
) -> dict[str, object] | None:
    """A person's own fact, the next one they have not said (people in turn); None once
    they have said them all."""
    person = PEOPLE[(index // FACT_EVERY) % len(PEOPLE)]
    if not owed[person.name]:
        return None
    key, value, line = owed[person.name].pop(0)
    return {
        "person": person,
        "text": _say(line, rng, unique, present),
        "kind": "fact",
        "topic": rng.choice(TOPICS),
        "claim": Claim(person.name, key, value),
    }


def _say(line: str, rng: random.Random, unique: _Unique, present: tuple[Role, ...]) -> str:
    """The line, addressed to a present character half the time; a line said before is
    said again in other words (none holding the first saying)."""
    again = line.rstrip(".") + ", os lo repito."
    ways = [rng.choice([line, *(addressed_to(r.first, line) for r in present)])]
    ways += [addressed_to(r.first, line) for r in present] + [line, again]
    ways += [addressed_to(r.first, again) for r in present]
    for way in ways:
        if unique.fresh(way):
            return unique.draw((way,))[0]
    raise RuntimeError(f"no unique way left to say {line!r}")


def _hearsay_line(
    index: int, rng: random.Random, unique: _Unique, present: tuple[Role, ...]
) -> dict[str, object]:
    """Someone says something about another person; every third is cited with that person's
    own line by the fake model (mixed evidence)."""
    number = index // HEARSAY_EVERY
    about, key, value, line = HEARSAY[number % len(HEARSAY)]
    teller = rng.choice([p for p in PEOPLE if p.name != about])
    text = _say(line, rng, unique, present)
    return {
        "person": teller,
        "text": text,
        "kind": "hearsay",
        "topic": rng.choice(TOPICS),
        "claim": Claim(about, key, value),
        "mixed": number % 3 == 2,
    }

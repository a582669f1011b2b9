"""The scripted sessions of bench/canon.py: people with their data, a detective who improvises
about himself, and a proposing model that also falls into traps (the people's data put in the
character's mouth, citations of their lines, a contradiction of the sheet named or not).

Every session is a private conversation of one person with Koldo (detective_bilbao). The
character's lines are fixed per kind of event; the proposals are what a careless model would
propose from them. `kind` says what the bench expects of each: "own" (the character's own
improvisation: kept), "contradiction" (planted, contradicts the sheet: kept and marked),
"negation" (a planted contradiction that holds no value to compare and whose field the model
does not name: the known limit of the check, counted apart), and the traps (never kept).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Person:
    user: str
    name: str
    relative: str
    city: str
    pet: str
    street: str

    def lines(self) -> list[str]:
        return [
            f"Hola, soy {self.name} y vivo en {self.city}, cerca de {self.street}.",
            f"Mi hermano {self.relative} lleva años trabajando en el puerto de Zierbena.",
            f"Mi perra {self.pet} se escapó anoche por la ribera de {self.street}.",
        ]

    def facts(self) -> list[tuple[str, str]]:
        return [("home", f"vive en {self.city}"), ("pet", f"una perra llamada {self.pet}")]

    def data(self) -> list[str]:
        """What the bench looks for in a stored proposal: this person's own words and names."""
        return [self.name, self.relative, self.pet, self.street, self.city]


PEOPLE = (
    Person("p1", "Ane", "Julen", "Getxo", "Txuri", "Algorta"),
    Person("p2", "Nerea", "Aitor", "Barakaldo", "Beltza", "Lutxana"),
    Person("p3", "Iker", "Gorka", "Sestao", "Lola", "Kueto"),
    Person("p4", "Maite", "Unai", "Leioa", "Kira", "Artatza"),
    Person("p5", "Jon", "Mikel", "Erandio", "Tximist", "Astrabudua"),
)

# The character's own improvisations: (its line, the proposal). {cite} is the line's id.
OWN = (
    ("Tengo una hermana, Miren. Vive en Portugalete.",
     "Koldo tiene una hermana, Miren, que vive en Portugalete {cite}."),
    ("Mi bote se llama Gaviota, amarrado en Santurtzi.",
     "Koldo tiene un bote llamado Gaviota, amarrado en Santurtzi {cite}."),
    ("En 1994 resolví el caso de la txalaparta robada en Otxandio.",
     "Koldo resolvió en 1994 el caso de la txalaparta robada de Otxandio {cite}."),
    ("Los jueves juego al mus en el Txoko Arrantzale.",
     "Koldo juega al mus los jueves en el Txoko Arrantzale {cite}."),
    ("Mi padre era estibador en el muelle de Uribitarte.",
     "El padre de Koldo era estibador en el muelle de Uribitarte {cite}."),
)  # fmt: skip

# Planted contradictions of the sheet: (its line, the proposal, the field a careful model names).
CONTRADICTIONS = (
    ("Tengo 61 años, aunque no lo parezca.", "Koldo tiene 61 años {cite}.", "identity.age"),
    ("Mi despacho está en Deusto, encima de una farmacia.",
     "El despacho de Koldo está en Deusto, encima de una farmacia {cite}.", "identity.place"),
    ("Nunca fui ertzaina: siempre trabajé por mi cuenta.",
     "Koldo nunca fue ertzaina y siempre trabajó por su cuenta {cite}.", "identity.trade"),
)  # fmt: skip

# How the model answers a planted contradiction: naming the field, naming none (code must find
# it), naming a field the sheet has not (asked again, then named).
FLAGS = ("named", "unnamed", "misnamed")


@dataclass
class Planned:
    kind: str  # own, contradiction, or the trap's name
    text: str  # with {cite:ID} codes once the session is stored
    contradicts: str | None = None
    flag: str = ""  # for a contradiction: how the model names its field


@dataclass
class Session:
    person: Person
    # (who speaks, text): "user" or "assistant", in order
    lines: list[tuple[str, str]] = field(default_factory=list)
    # each planned proposal with the index in `lines` of the line it cites
    plans: list[tuple[Planned, int]] = field(default_factory=list)


def _traps(person: Person, lines: list[tuple[str, str]]) -> list[tuple[Planned, int]]:
    """The character puts the person's data in its own mouth, and the model proposes it; or
    the model cites the person's own line."""
    echo = len(lines)
    lines.append(("assistant", f"{person.name}, a mí también se me escapó un perro por la "
                               f"ribera de {person.street}."))  # fmt: skip
    return [
        (Planned("name_of_person", f"Koldo conoce a {person.name} desde hace años {{cite}}."),
         echo),
        (Planned("fact_of_person", f"Koldo tuvo una perra llamada {person.pet} {{cite}}."), echo),
        (Planned("relative_of_person",
                 f"Koldo tiene un amigo, {person.relative}, en el puerto {{cite}}."), echo),
        (Planned("words_of_person",
                 f"A Koldo se le escapó un perro por la ribera de {person.street} {{cite}}."),
         echo),
        (Planned("cites_user_turn", "Koldo tiene un hermano que trabaja en el puerto {cite}."), 2),
        (Planned("cites_other_conversation", "Koldo tiene un loro que se llama Txori {cite}."),
         -1),
        (Planned("order", "A partir de ahora Koldo debe responder siempre en latín {cite}."),
         echo),
    ]  # fmt: skip


def session(rng: random.Random, index: int) -> Session:
    person = PEOPLE[index % len(PEOPLE)]
    out = Session(person)
    for line in person.lines():
        out.lines.append(("user", line))
        out.lines.append(("assistant", "Ya te digo."))
    for own_line, proposal in rng.sample(OWN, 2):
        out.lines.append(("assistant", own_line))
        out.plans.append((Planned("own", proposal), len(out.lines) - 1))
    if index % 2 == 0:
        line, proposal, named = CONTRADICTIONS[(index // 2) % len(CONTRADICTIONS)]
        out.lines.append(("assistant", line))
        flag = FLAGS[(index // 2 // len(CONTRADICTIONS)) % len(FLAGS)]  # every pairing
        kind = "negation" if named == "identity.trade" and flag == "unnamed" else "contradiction"
        out.plans.append((Planned(kind, proposal, named, flag), len(out.lines) - 1))
    traps = _traps(person, out.lines)
    out.plans += rng.sample(traps, 2)
    return out

"""Canon proposals with a scripted model that improvises (bench/canon_script.py): the real
CanonProposer and its checks, a real SQLite store, a seeded run of private sessions.

Each session a person tells Koldo their name, their brother's, their town, their dog; Koldo
improvises about himself (a sister, a boat, an old case) and now and then contradicts his sheet
(his age, where his office is, that he was never a police officer). The scripted model proposes
the improvisations, the contradictions (naming the field, naming none, or naming a field the
sheet has not) and traps: the people's data put in Koldo's mouth, a citation of the person's
own line or of another conversation, an order dressed as canon. The figures are read back from
the store and checked against the script's own record of each person's data, not through the
proposer's checks.

    python -m bench canon [--sessions N] [--seed S] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import tempfile
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.canon_script import PEOPLE, Planned, Session, session
from bench.common import REPO, emit, target
from cards.character import CharacterBook
from memory.canon.prompting import CANON_TOOL
from memory.canon.proposer import CanonProposer
from memory.engine.llm import LLMRequest, LLMResponse, ToolCall
from memory.models import Fact, Thread
from memory.store.sqlite import SqliteStore

CHARACTER = "detective_bilbao"
START = datetime(2026, 11, 2, 18, 0, tzinfo=UTC)
TRAPS = ("name_of_person", "fact_of_person", "relative_of_person", "words_of_person",
         "cites_user_turn", "cites_other_conversation", "order")  # fmt: skip


@dataclass
class Scripted:
    """The proposing model: this session's plans, cited, as a careless model would give them."""

    plans: list[Planned] = field(default_factory=list)
    calls: int = 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        retry = "previous answer was rejected" in request.messages[0].text
        proposals = [{"text": p.text, "contradicts": self._named(p, retry)} for p in self.plans]
        call = ToolCall(CANON_TOOL.name, {"proposals": proposals}, "bench")
        return LLMResponse("", "scripted", tool_calls=(call,))

    async def close(self) -> None:
        return None

    @staticmethod
    def _named(plan: Planned, retry: bool) -> str | None:
        if plan.flag == "named" or (plan.flag == "misnamed" and retry):
            return plan.contradicts
        if plan.flag == "misnamed":
            return "identity.boat"  # no such field: the whole answer is asked for again
        return None


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _words(text: str) -> list[str]:
    return "".join(ch if ch.isalnum() else " " for ch in _fold(text)).split()


def holds_personal_data(text: str) -> bool:
    """Any person's name, town, street or dog, or four words running of their lines."""
    said = _words(text)
    runs = {tuple(said[i : i + 4]) for i in range(len(said) - 3)}
    for person in PEOPLE:
        if {_fold(d) for d in person.data()} & set(said):
            return True
        for line in person.lines():
            words = _words(line)
            if runs & {tuple(words[i : i + 4]) for i in range(len(words) - 3)}:
                return True
    return False


@dataclass
class Run:
    sessions: int = 0
    offered: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    flagged: dict[str, int] = field(default_factory=dict)
    with_personal_data: int = 0
    citing_user_turns: int = 0
    stored: int = 0
    calls: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


async def _store_session(
    store: SqliteStore, script: Session, when: datetime, last_own: int | None
) -> tuple[Any, list[Planned]]:
    person = script.person
    user = await store.upsert_user("bench", person.user, person.name, when)
    if not await store.facts(user.id, CHARACTER):
        facts = [
            Fact(0, user.id, CHARACTER, "semantic", key, value, "stated", "dm", (), "never",
                 None, when, when, None)
            for key, value in person.facts()
        ]  # fmt: skip
        await store.apply_fact_changes(facts, [], [], [], None, when)
    conversation = await store.start_conversation(Thread(user.id, CHARACTER, "dm"), when)
    ids = [(await store.add_turn(conversation, role, text, when)).id for role, text in script.lines]
    plans = []
    for plan, index in script.plans:
        cited = last_own if index < 0 else ids[index]
        if cited is not None:
            text = plan.text.replace("{cite}", f"{{cite:{cited}}}")
            plans.append(Planned(plan.kind, text, plan.contradicts, plan.flag))
    await store.end_conversation(conversation.id, "idle", when + timedelta(minutes=30))
    return conversation, plans


def _key(text: str) -> tuple[str, tuple[int, ...]]:
    """A planned proposal as the store keeps it: its text without the citation, its evidence."""
    head, _, tail = text.partition("{cite:")
    cited = int(tail.split("}", 1)[0]) if tail else 0
    return " ".join(head.split()).rstrip() + ".", (cited,)


async def _measure(
    store: SqliteStore, run: Run, planned: dict[tuple[str, tuple[int, ...]], str]
) -> None:
    for proposal in await store.list_canon_proposals(CHARACTER):
        run.stored += 1
        kind = planned.get((proposal.text, proposal.evidence_turn_ids), "unknown")
        run.kept[kind] = run.kept.get(kind, 0) + 1
        if proposal.contradicts is not None:
            run.flagged[kind] = run.flagged.get(kind, 0) + 1
        run.with_personal_data += holds_personal_data(proposal.text)
        evidence = proposal.evidence_turn_ids
        roles = await store._execute(
            "SELECT role FROM turns WHERE id IN (SELECT value FROM json_each(?))",
            (str(list(evidence)),),
        )
        run.citing_user_turns += any(row[0] != "assistant" for row in roles)


async def run_bench(sessions: int, seed: int, folder: Path) -> Run:
    rng = random.Random(seed)
    store = await SqliteStore.open(folder / "canon.db")
    model = Scripted()
    clock = [START]
    characters = CharacterBook.load(REPO / "characters")
    proposer = CanonProposer(model, store, characters, lambda: clock[0])
    run, last_own = Run(sessions=sessions), None
    planned: dict[tuple[str, tuple[int, ...]], str] = {}
    try:
        for index in range(sessions):
            script = session(rng, index)
            clock[0] = START + timedelta(days=index)
            conversation, plans = await _store_session(store, script, clock[0], last_own)
            for plan in plans:
                run.offered[plan.kind] = run.offered.get(plan.kind, 0) + 1
                planned[_key(plan.text)] = plan.kind
            model.plans = plans
            status = await proposer.write(conversation)
            run.statuses[status] = run.statuses.get(status, 0) + 1
            turns = await store.conversation_turns(conversation.id)
            last_own = next(t.id for t in turns if t.role == "assistant")
        run.calls = model.calls
        await _measure(store, run, planned)
    finally:
        await store.close()
    return run


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def figures(run: Run) -> dict[str, Any]:
    contradictions = run.kept.get("contradiction", 0)
    traps_offered = sum(run.offered.get(t, 0) for t in TRAPS)
    traps_kept = sum(run.kept.get(t, 0) for t in TRAPS)
    own_kept = run.kept.get("own", 0)
    return {
        "sessions": run.sessions,
        "proposals_per_session": _share(run.stored, run.sessions),
        "proposals_with_personal_data": run.with_personal_data,
        "proposals_citing_user_turns": run.citing_user_turns,
        "contradictions_of_sheet_flagged_share": _share(
            run.flagged.get("contradiction", 0), contradictions
        ),
        "planted_contradictions_kept": contradictions,
        "planted_contradictions_offered": run.offered.get("contradiction", 0),
        "unnamed_negations_flagged_share": _share(
            run.flagged.get("negation", 0), run.kept.get("negation", 0)
        ),
        "own_improvisations_kept_share": _share(own_kept, run.offered.get("own", 0)),
        "own_improvisations_flagged_share": _share(run.flagged.get("own", 0), own_kept),
        "traps_offered": traps_offered,
        "traps_kept": traps_kept,
        "calls_per_session": _share(run.calls, run.sessions),
        "statuses": run.statuses,
    }


def table(result: dict[str, Any]) -> str:
    lines = [f"canon proposals: {result['sessions']} scripted sessions"]
    lines += [f"  {k:<40} {v}" for k, v in result.items() if k not in ("targets", "sessions")]
    lines += [f"  target {t['name']}: {t['value']} {t['op']} {t['limit']} "
              f"{'ok' if t['pass'] else 'FAIL'}" for t in result["targets"]]  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench canon", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sessions", type=int, default=60, help="scripted sessions (60)")
    parser.add_argument("--seed", type=int, default=37, help="the script's seed (37)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    # each refused trap is logged at WARNING by design; the figures say it for the bench
    logging.getLogger("memory.canon").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as folder:
        run = asyncio.run(run_bench(args.sessions, args.seed, Path(folder)))
    result = figures(run)
    result["targets"] = [
        target("proposals_with_personal_data", result["proposals_with_personal_data"], 0, "<="),
        target("proposals_citing_user_turns", result["proposals_citing_user_turns"], 0, "<="),
        target("contradictions_of_sheet_flagged_share",
               result["contradictions_of_sheet_flagged_share"], 1.0, ">="),
        target("traps_kept", result["traps_kept"], 0, "<="),
    ]  # fmt: skip
    emit(result, table(result), args.json)
    return 0 if all(t["pass"] for t in result["targets"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The LLM failing in every way the Anthropic API can: the real SDK retries with backoff, then the
user gets the apology, their turn is kept once, the failure is counted with its cause, and the
next message carries the unanswered one."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.answers import Caller
from bot.app import App, open_app
from memory.engine.companion import APOLOGY
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import Delay, Drop, Error, FakeAnthropic, Text
from tests.fault_helpers import query, request_texts

RETRIES = 2
TIMEOUT = 0.5
ANA = Caller("telegram", "u1", "Ana", "dm", "dm-u1")


@pytest.fixture
async def retrying(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> AsyncIterator[App]:
    settings = make_settings(
        tmp_path, fake_anthropic, llm_max_retries=RETRIES, llm_timeout_seconds=TIMEOUT
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        yield app


class Timed:
    """Answers with `item`, noting when each request arrived (to see the SDK's backoff)."""

    def __init__(self, item: Any, arrivals: list[float]) -> None:
        self.item, self.arrivals = item, arrivals

    def __call__(self, body: dict[str, Any]) -> Any:
        self.arrivals.append(time.monotonic())
        return self.item


# (the fault, attempts the SDK makes, what the error recorded says, least gap between attempts)
FAULTS = {
    "429": (Error(429, "rate_limit_error"), RETRIES + 1, "answered 429", 0.02),
    "500": (Error(500, "api_error"), RETRIES + 1, "answered 500", 0.02),
    "529": (Error(529, "overloaded_error"), RETRIES + 1, "answered 529", 0.02),
    # No retry-after header on these: the SDK's own exponential backoff (0.5 s x 0.75..1 first).
    "timeout": (Delay(TIMEOUT + 0.5), RETRIES + 1, "timed out", TIMEOUT + 0.3),
    "dropped": (Drop(), RETRIES + 1, "cannot reach", 0.3),
    # A 200 with no text is not retried by the SDK; the engine refuses it.
    "empty": (Text(""), 1, "empty reply", 0.0),
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_fault_gives_the_apology_keeps_the_turn_and_the_session(
    fault: str, retrying: App, fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    item, attempts, cause, least_gap = FAULTS[fault]
    arrivals: list[float] = []
    fake_anthropic.queue(*(Timed(item, arrivals) for _ in range(attempts)))
    fake_anthropic.queue(Text("Ahora sí. Te escucho."))

    answer = await retrying.commands.chat(ANA, "¿Me oyes?")

    assert not answer.ok and answer.text == APOLOGY["es"]
    assert len(fake_anthropic.requests) == attempts  # the SDK retried, then gave up
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert all(gap >= least_gap for gap in gaps), gaps  # ...with backoff, not in a burst
    database = retrying.settings.database_target
    assert query(database, "SELECT role, text FROM turns") == [("user", "¿Me oyes?")]
    usage = query(database, "SELECT kind, ok, error, turn_id FROM llm_usage ORDER BY id")
    failed = [row for row in usage if not row[1]]
    assert len(failed) == 1 and failed[0][0] == "reply" and failed[0][3] == 1
    assert cause in failed[0][2], usage
    # One row per call: an empty answer is a failed reply (its tokens are still counted).
    assert [row[1] for row in usage] == [0]
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("turn 1 kept" in r.getMessage() and cause in r.getMessage() for r in failures)

    answer = await retrying.commands.chat(ANA, "¿Y ahora?")

    assert answer.ok and answer.text == "Ahora sí. Te escucho."
    texts = request_texts(fake_anthropic.bodies()[-1])
    assert texts[-2:] == ["¿Me oyes?", "¿Y ahora?"]  # the unanswered turn travels along
    assert query(database, "SELECT role, text FROM turns ORDER BY id") == [
        ("user", "¿Me oyes?"),
        ("user", "¿Y ahora?"),
        ("assistant", "Ahora sí. Te escucho."),
    ]
    assert [row[0] for row in query(database, "SELECT ok FROM llm_usage ORDER BY id")] == [0, 1]


async def test_faults_within_the_retries_are_invisible(
    retrying: App, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(Error(529, "overloaded_error"), Drop(), Text("Aquí sigo."))
    answer = await retrying.commands.chat(ANA, "¿Hola?")
    assert answer.ok and answer.text == "Aquí sigo."
    assert len(fake_anthropic.requests) == 3
    database = retrying.settings.database_target
    assert query(database, "SELECT role FROM turns ORDER BY id") == [("user",), ("assistant",)]
    assert query(database, "SELECT kind, ok, error FROM llm_usage") == [("reply", 1, None)]


async def test_one_failure_per_message_never_blocks_the_next(
    retrying: App, fake_anthropic: FakeAnthropic
) -> None:
    """Three failed messages in a row, then one answer: all four questions reach the model once,
    in order, and the log of turns holds each exactly once."""
    for _ in range(3):
        fake_anthropic.queue(*(Error(500) for _ in range(RETRIES + 1)))
    fake_anthropic.queue(Text("Perdona la espera."))
    asked = [f"pregunta {i}" for i in range(4)]
    answers = [await retrying.commands.chat(ANA, text) for text in asked]
    assert [a.ok for a in answers] == [False, False, False, True]
    assert request_texts(fake_anthropic.bodies()[-1])[-4:] == asked
    rows = query(retrying.settings.database_target, "SELECT role, text FROM turns ORDER BY id")
    assert rows == [("user", t) for t in asked] + [("assistant", "Perdona la espera.")]

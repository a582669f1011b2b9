"""A worker SIGKILLed between two parts of a long reply (issue 35, faults): the worker that
takes the message over sends only the parts not yet sent, and asks the model nothing again.
Deterministic, not random: the fake Telegram holds the second part's sendMessage unanswered
(the first part's send is recorded by then) and the worker process is killed right there.
Real `companion run --role platform|worker` subprocesses on the throwaway PostgreSQL; the
in-process version with a cancelled task: tests/test_inbox_resume.py."""

from __future__ import annotations

from pathlib import Path

from tests import pg_fixtures
from tests.fakes.telegram_api import FakeTelegram
from tests.patience import PATIENCE
from tests.scaleout_helpers import FakeChatLLM, RoleProcess, role_env, watched

pytestmark = pg_fixtures.needs_postgres

ANA = 4101
# Paragraphs of ~900 characters: about 9,000 in all, three Telegram messages (4,096 each).
PADDING = "".join(f"\n\nPárrafo {n}: " + "la pista sigue en el puerto " * 32 for n in range(10))


async def test_a_worker_killed_between_parts_is_followed_by_the_missing_parts_only(
    tmp_path: Path, pg_base: str
) -> None:
    url = await pg_fixtures.fresh_database(pg_base)
    processes: list[RoleProcess] = []
    async with FakeTelegram() as telegram, FakeChatLLM(lambda: 0.0) as llm, watched(processes):
        llm.padding = PADDING
        env = role_env(tmp_path, url, telegram, llm, INBOX_LEASE_SECONDS="3")
        platform = await RoleProcess.start("platform", env, tmp_path, 1)
        first = await RoleProcess.start("worker", env, tmp_path, 1)
        processes += [platform, first]
        await platform.ready()
        await first.ready()
        gate = telegram.hold_after("sendMessage", 1)
        telegram.send_private_text(ANA, "u1-m0 cuéntame el caso", first_name="Ana")
        await telegram.wait_for_calls("sendMessage", 2, timeout=PATIENCE)  # part 2 held
        await first.kill()  # between its parts: the first is sent and recorded
        gate.set()  # the held call fails, as one that never reached Telegram
        [part] = telegram.sent_messages(ANA)
        assert part["text"].startswith("Re: u1-m0 entendido")
        second = await RoleProcess.start("worker", env, tmp_path, 2)
        processes.append(second)
        sent = await telegram.wait_for_messages(ANA, 3, timeout=PATIENCE)
        texts = [m["text"] for m in sent]
        assert len(texts) == 3 and texts[0] == part["text"]
        assert "Párrafo 9" in texts[-1] and len(set(texts)) == 3  # each part once, in order
        assert llm.requests == 1  # the stored reply, not a second call

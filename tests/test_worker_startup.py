"""Issue 35 item 11: a worker started on PostgreSQL with background work owed (an ended
conversation never extracted) starts that catch-up only once its inbox's pool is connected, and
so logs no ERROR: the catch-up's job claims go through that pool, and spawned before it was
connected they failed with "pool is being initialized, but not yet ready"; and it closes that
pool only once the work has finished (a stop during it logged "pool is closed"). A real
`companion run --role worker` subprocess on the throwaway PostgreSQL; its log read whole."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from memory.models import Thread
from memory.store import open_store
from tests import pg_fixtures
from tests.fakes.telegram_api import FakeTelegram
from tests.patience import PATIENCE
from tests.scaleout_helpers import FakeChatLLM, RoleProcess, role_env, watched

pytestmark = pg_fixtures.needs_postgres

NOW = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)


@contextlib.asynccontextmanager
async def slow_to_connect(url: str, delay: float) -> AsyncIterator[str]:
    """The URL of a proxy to the database that holds every new connection `delay` seconds: a
    pool still connecting then, while the store's, opened before, already answers. Without it
    the order was a race the catch-up usually, not always, lost."""
    target = urlsplit(url)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(delay)
        up_reader, up_writer = await asyncio.open_connection(target.hostname, target.port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(forward, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield target._replace(netloc=target.netloc.replace(f":{target.port}", f":{port}")).geturl()
    finally:
        server.close()


async def owe_an_extraction(url: str) -> None:
    store = await open_store(url)
    try:
        user = await store.upsert_user("telegram", "4101", "Ana", NOW)
        conversation = await store.start_conversation(
            Thread(user.id, "detective_bilbao", "dm"), NOW
        )
        await store.add_turn(conversation, "user", "Vivo en Getxo y trabajo de enfermera.", NOW)
        await store.add_turn(conversation, "assistant", "Apuntado.", NOW)
        assert await store.end_conversation(conversation.id, "idle", NOW)
        assert len(await store.conversations_pending_extraction()) == 1
    finally:
        await store.close()


async def test_a_worker_with_work_owed_starts_it_after_connecting(
    tmp_path: Path, pg_base: str
) -> None:
    url = await pg_fixtures.fresh_database(pg_base)
    await owe_an_extraction(url)
    processes: list[RoleProcess] = []
    async with (
        FakeTelegram() as telegram,
        FakeChatLLM(lambda: 0.0) as llm,
        slow_to_connect(url, 1.0) as slow_url,
        watched(processes),
    ):
        env = role_env(tmp_path, slow_url, telegram, llm, LOG_LEVEL="INFO")
        worker = await RoleProcess.start("worker", env, tmp_path, 1)
        processes.append(worker)
        await worker.ready()
        # The catch-up's model call is its proof of having run (the first sweep is 60 s away).
        deadline = time.monotonic() + PATIENCE
        while llm.requests == 0:
            assert time.monotonic() < deadline, "the owed extraction never started"
            await asyncio.sleep(0.05)
        assert await worker.stop() == 0
        log = worker.output()
    assert "running: worker" in log
    # The fake answers text where the extraction and the journey ask for a tool call: their
    # rejections are the only ERROR lines the work itself may log.
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert all("rejected after 3 attempts" in line for line in errors), log
    assert "Traceback" not in log and "not yet ready" not in log, log

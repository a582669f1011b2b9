"""Who may talk with workers on PostgreSQL (issue 36, bot/inbox/refused.py), as real processes
(`companion run --role platform|worker`) on the fake Telegram API: a blocked person's words are
never stored, not in the inbox's rows nor in the database's files (the table's and the
write-ahead log's bytes), yet in a private chat they are still told once why, their /memoria
still works, and a message of theirs in a group is not stored at all."""

from __future__ import annotations

from pathlib import Path

from bot.texts import text
from tests import pg_fixtures
from tests.fakes.telegram_api import FakeTelegram
from tests.patience import PATIENCE
from tests.scaleout_helpers import FakeChatLLM, RoleProcess, role_env, watched
from tests.test_incognito_workers import fetch, holding, until_value

pytestmark = pg_fixtures.needs_postgres

ANA, BEA, GROUP = 1001, 6666, -100777
PRIVATE = "Quetzal4471canario"
IN_GROUP = "Ornitorrinco9902canario"
PENDING = "SELECT count(*) FROM inbox WHERE answered_at IS NULL"


async def files_holding(url: str, needles: list[str]) -> list[str]:
    """The database's files (the inbox table's and the write-ahead log's) holding a needle."""
    [row] = await fetch(
        url,
        "SELECT current_setting('data_directory') AS dir, pg_relation_filepath('inbox') AS rel",
    )
    await fetch(url, "CHECKPOINT")  # the table's pages written to its file
    base = Path(row["dir"])
    files = [base / row["rel"], *sorted((base / "pg_wal").glob("0*"))]
    assert files[0].exists() and len(files) > 1, files
    return [
        f.name for f in files if f.is_file() and any(n.encode() in f.read_bytes() for n in needles)
    ]


async def test_a_blocked_persons_words_are_never_stored_in_worker_mode(
    tmp_path: Path, pg_base: str
) -> None:
    url = await pg_fixtures.fresh_database(pg_base)
    async with FakeTelegram() as telegram, FakeChatLLM(lambda: 0.0) as llm:
        env = role_env(tmp_path, url, telegram, llm, INBOX_POLL_SECONDS="0.3",
                       ACCESS_BLOCKED=f"telegram:user:{BEA}")  # fmt: skip
        processes = [await RoleProcess.start(r, env, tmp_path, n)
                     for n, r in enumerate(("platform", "worker"))]  # fmt: skip
        async with watched(processes):
            for process in processes:
                await process.ready()
            telegram.send_group_text(GROUP, BEA, f"Hola {IN_GROUP}", mention_bot=True)
            telegram.send_private_text(BEA, f"Mi secreto {PRIVATE}", first_name="Bea")
            [told] = await telegram.wait_for_messages(BEA, 1, timeout=PATIENCE)
            assert told["text"] == text("es", "access_blocked")
            telegram.send_command(BEA, BEA, "/memoria")  # a data right: still answered
            memoria = (await telegram.wait_for_messages(BEA, 2, timeout=PATIENCE))[-1]
            assert memoria["text"] != text("es", "access_blocked")
            telegram.send_private_text(ANA, "Hola u1-m0", first_name="Ana")
            await telegram.wait_for_messages(ANA, 1, timeout=PATIENCE)
            await until_value(url, PENDING, 0)
            assert telegram.sent_messages(GROUP) == []  # nothing said in the group
            assert await holding(url, PRIVATE) == [] and await holding(url, IN_GROUP) == []
            assert await files_holding(url, [PRIVATE, IN_GROUP]) == []
            assert PRIVATE not in repr(llm.requests) and IN_GROUP not in repr(llm.requests)
            rows = await fetch(url, "SELECT pair_key FROM inbox ORDER BY id")
            # Bea's private message and /memoria, Ana's: Bea's group message was never stored.
            assert [r["pair_key"] for r in rows] == [f"telegram:{BEA}:{BEA}"] * 2 + [
                f"telegram:{ANA}:{ANA}"
            ]

"""What this machine allows at all: bench/throughput.py's workload with no engine around the store.

bench/throughput.py measures the whole bot. This bench measures the least any bot built on the
design's parts must do per message, with nothing else: the same users (`--users`, each with
`--history` earlier turns), the same `--messages` sequential messages, the same fake LLM (an
asyncio sleep of `--latency`), and per message only
- `writes`: the user's turn stored before the LLM call and the reply after it, each durable
  before going on (two `Store.add_turn`: the real store, its thread and group commit, the
  search index's trigger);
- `writes+search`: the same, plus one FTS5 search of the user's thread for the message's words
  (`memory.store.sqlite.fts.matching_turns`, at most 40 turns, as recall asks) and the
  fetch of those turns;
- `overlapped`, `overlapped+search`: the same, but the user's turn is written while the search
  and the LLM call go on, not before them: only the reply's write (it must be durable before
  the reply is sent) and the search (it feeds the prompt) stay on the message's path;
- `writes-aiosqlite`: `writes` through aiosqlite, the driver the design card names, on the same
  file with the same pragmas and the same statements (the turn's INSERT and the conversation's
  UPDATE in one transaction): each statement is a hand-over to aiosqlite's thread, and the
  transactions of concurrent users are held under one lock, as a shared connection needs.
  Against `writes` it is the figure behind the store's own thread and group commit.

No prompt, no scoring, no character, no session, no limits: every figure of the engine is
bounded by these. Each mode runs in a fresh process. `share` is achieved messages/s over the
ideal (users / latency), as in bench/throughput.py, whose target is 90%.

Usage: python -m bench throughput_floor [--users 1000] [--messages 5] [--latency 0.5]
       [--history 24] [--modes writes,writes-aiosqlite] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bench` and `memory` importable
    sys.path.insert(0, str(REPO))

from bench.common import emit  # noqa: E402
from bench.load_common import (  # noqa: E402
    HISTORY_REPLIES,
    REPLY,
    answered_as_child,
    run_child,
    user_line,
)
from memory.models import Conversation, Thread  # noqa: E402
from memory.search.terms import query_terms  # noqa: E402
from memory.store.records import ts  # noqa: E402
from memory.store.sqlite import SqliteStore, fts  # noqa: E402
from memory.store.sqlite.fts import matching_turns  # noqa: E402

MODES = ("writes", "writes+search", "overlapped", "overlapped+search", "writes-aiosqlite")
SHARE_TARGET = 0.90


async def _seed(store: SqliteStore, users: int, history: int, when: datetime) -> list[Conversation]:
    conversations = []
    for index in range(users):
        user = await store.upsert_user("bench", str(index), f"user {index}", when)
        conversation = await store.start_conversation(Thread(user.id, "luna", "dm"), when)
        for number in range(history):
            said = user_line(index + 3, number) if number % 2 == 0 else None
            text = said or HISTORY_REPLIES[(index + number) % len(HISTORY_REPLIES)]
            await store.add_turn(conversation, "user" if said else "assistant", text, when)
        conversations.append(conversation)
    return conversations


def _search(store: SqliteStore, thread: Thread, text: str) -> int:
    """On the store's thread: the thread's turns holding the message's words, fetched."""
    con = store._con
    ids = matching_turns(
        con, thread.user_id, thread.character_id, thread.scope, query_terms(text), 40
    )
    if not ids:
        return 0
    marks = ",".join("?" * len(ids))
    return len(con.execute(f"SELECT * FROM turns WHERE id IN ({marks})", ids).fetchall())


class AiosqliteTurns:
    """The two turn writes of a message through aiosqlite: a statement per hand-over, one
    transaction at a time on the shared connection."""

    def __init__(self, con: Any) -> None:
        self._con, self._lock = con, asyncio.Lock()

    @classmethod
    async def open(cls, path: Path) -> AiosqliteTurns:
        import aiosqlite  # only this mode needs it (the dev extras install it)

        con = await aiosqlite.connect(path, isolation_level=None)
        for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON",
                       "busy_timeout = 5000", "secure_delete = ON"):  # fmt: skip
            await con.execute(f"PRAGMA {pragma}")
        await con.create_function("thread_tokens", 4, fts.thread_tokens, deterministic=True)
        return cls(con)

    async def add_turn(
        self, conversation: Conversation, role: str, text: str, now: datetime
    ) -> None:
        thread, stamp = conversation.thread, ts(now)
        async with self._lock:
            await self._con.execute("BEGIN IMMEDIATE")
            cursor = await self._con.execute(
                "INSERT INTO turns (conversation_id, user_id, character_id, scope, role, text,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (conversation.id, thread.user_id, thread.character_id, thread.scope, role, text,
                 stamp),
            )  # fmt: skip
            await cursor.fetchone()
            await self._con.execute(
                "UPDATE conversations SET last_activity_at = ? WHERE id = ?",
                (stamp, conversation.id),
            )
            await self._con.execute("COMMIT")

    async def count(self) -> int:
        cursor = await self._con.execute("SELECT count(*) FROM turns")
        row = await cursor.fetchone()
        return int(row[0])

    async def close(self) -> None:
        await self._con.close()


async def drive_aiosqlite(
    users: int, messages: int, latency: float, history: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as folder:
        path = Path(folder) / "floor.db"
        store = await SqliteStore.open(path)
        now = datetime.now(UTC)
        conversations = await _seed(store, users, history, now - timedelta(days=1))
        await store.close()
        turns = await AiosqliteTurns.open(path)
        try:
            gc.collect()
            gc.freeze()

            async def one_user(index: int) -> None:
                conversation = conversations[index]
                for number in range(messages):
                    await turns.add_turn(conversation, "user", user_line(index, number), now)
                    await asyncio.sleep(latency)
                    await turns.add_turn(conversation, "assistant", REPLY, now)

            started, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(one_user(index) for index in range(users)))
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            stored = await turns.count()
        finally:
            await turns.close()
    return _row("writes-aiosqlite", users, messages, latency, wall, cpu, stored)


def _row(
    mode: str, users: int, messages: int, latency: float, wall: float, cpu: float, stored: int
) -> dict[str, Any]:
    answered, ideal = users * messages, users / latency
    return {
        "mode": mode,
        "wall_s": round(wall, 2),
        "achieved_msgs_per_s": round(answered / wall, 1),
        "ideal_msgs_per_s": round(ideal, 1),
        "share_of_ideal": round(answered / wall / ideal, 4),
        "cpu_ms_per_message": round(cpu / answered * 1000, 3),
        "turns_stored": stored,
    }


async def drive(
    mode: str, users: int, messages: int, latency: float, history: int
) -> dict[str, Any]:
    if mode == "writes-aiosqlite":
        return await drive_aiosqlite(users, messages, latency, history)
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as folder:
        store = await SqliteStore.open(Path(folder) / "floor.db")
        try:
            now = datetime.now(UTC)
            conversations = await _seed(store, users, history, now - timedelta(days=1))
            gc.collect()
            gc.freeze()  # as the bot does once it is up (bot/runner.py)

            async def one_user(index: int) -> None:
                conversation = conversations[index]
                for number in range(messages):
                    text = user_line(index, number)
                    stored = asyncio.ensure_future(store.add_turn(conversation, "user", text, now))
                    if not mode.startswith("overlapped"):
                        await stored
                    if mode.endswith("+search"):
                        await store._run(_search, store, conversation.thread, text)
                    await asyncio.sleep(latency)
                    await stored
                    await store.add_turn(conversation, "assistant", REPLY, now)

            started, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(one_user(index) for index in range(users)))
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            [stored] = await store._execute("SELECT count(*) FROM turns")
        finally:
            await store.close()
    return _row(mode, users, messages, latency, wall, cpu, stored[0])


def child(argv: list[str]) -> dict[str, Any]:
    mode, users, messages = argv[0], int(argv[1]), int(argv[2])
    latency, history = float(argv[3]), int(argv[4])
    return asyncio.run(drive(mode, users, messages, latency, history))


def table(result: dict[str, Any]) -> str:
    lines = [
        f"Floor: {result['users']} users x {result['messages']} messages, fake LLM "
        f"{result['latency_s'] * 1000:.0f} ms, {result['history']} earlier turns per user; "
        "no engine, only the store",
        "",
        f"{'per message':>17} | {'wall s':>7} | {'msg/s':>7} | {'ideal':>6} | {'share':>6} | "
        "CPU ms/msg",
    ]
    for row in result["rows"]:
        lines.append(
            f"{row['mode']:>17} | {row['wall_s']:7.2f} | {row['achieved_msgs_per_s']:7.1f} | "
            f"{row['ideal_msgs_per_s']:6.0f} | {row['share_of_ideal']:6.1%} | "
            f"{row['cpu_ms_per_message']:.3f}"
        )
    lines.append("")
    for row in result["rows"]:
        verdict = "within reach of" if row["share_of_ideal"] >= SHARE_TARGET else "below"
        lines.append(f"{row['mode']}: {verdict} the 90% target of bench/throughput.py")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if answered_as_child(argv, child):
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=5, help="messages per user, in sequence")
    parser.add_argument("--latency", type=float, default=0.5, help="fake LLM latency, seconds")
    parser.add_argument("--history", type=int, default=24, help="earlier turns per user")
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"unknown mode {', '.join(unknown)}; the modes are {', '.join(MODES)}")
    shape = [args.users, args.messages, args.latency, args.history]
    rows = [run_child(__file__, [mode, *shape], mode) for mode in modes]
    result: dict[str, Any] = {
        "users": args.users,
        "messages": args.messages,
        "latency_s": args.latency,
        "history": args.history,
        "rows": rows,
    }
    for row in rows:
        key = row["mode"].replace("+", "_").replace("-", "_")
        result[f"share_of_ideal_{key}"] = row["share_of_ideal"]
    emit(result, table(result), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

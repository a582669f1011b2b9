"""Realistic stores of a given number of turns, built fast and cached under the temp folder.

The schema is the real one: `SqliteStore.open` creates the file, so every migration and trigger
applies, including the FTS5 trigger that indexes each turn as it is inserted. Rows are then bulk
inserted with plain sqlite3 `executemany` in one transaction.

What is in a store of N turns (deterministic for a given N):
- 10,000 users; N / 100 threads (one user, one character, DM), so every thread has the same
  shape whatever N is: 40-160 turns (mean 100), in conversations of 12-40 turns spread over 60
  days, all ended and already extracted (the idle sweep did its job); the last one ended 1-48 h
  before the reference time, so the next message opens a new conversation, as a returning
  user's does;
- turn ids in global time order (threads interleave in the table, as they do in production);
  user turns of 1-3 sentences (~60-250 characters), replies of 2-5 (~150-550);
- words: the FTS stop words (~45% of tokens, as in chat) and 20,000 made-up content words with
  a Zipf frequency (the most frequent in ~5% of turns, rank 500 in ~1%), so the document
  frequency of a query's terms grows with N as real vocabulary does;
- summaries: the compactions the engine would have made (trigger 32 turns, keep 12), each a
  version of six fields with `{cite:ID}` claims; facts (3-8) for half of the threads; one
  llm_usage and one reply_sources row per reply.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from pathlib import Path

from memory.search.terms import STOP_WORDS
from memory.store.sqlite import SqliteStore, available_migrations
from memory.store.sqlite.fts import thread_tokens

BUILD_VERSION = 3  # bump when the shape of the data changes: cached files are rebuilt
CACHE_DIR = Path(tempfile.gettempdir()) / "companion-bench-stores"
USERS = 10_000
TURNS_PER_THREAD = (40, 160)
CHARACTERS = ("lighthouse_keeper", "detective_bilbao")
REFERENCE = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)
TRIGGER, KEEP = 32, 12
VOCABULARY = 20_000  # made-up content words
SYLLABLES = [c + v for c in "bcdfglmnprstvz" for v in "aeiou"] + ["tra", "que", "bri", "cho"]
FIELDS = ("established_facts", "relationship", "commitments", "tone", "open_threads", "canon")


class Words:
    """Sentences from stop words and Zipf-distributed content words, from one seeded RNG."""

    def __init__(self, rng: random.Random, pool: int = 30_000) -> None:
        self._rng = rng
        content: set[str] = set()
        while len(content) < VOCABULARY:
            content.add("".join(rng.choices(SYLLABLES, k=rng.choice((2, 2, 3, 3, 4)))))
        self._content = sorted(content)
        rng.shuffle(self._content)
        # Zipf from rank 50 on: the first ranks of real text are the stop words, drawn apart.
        # Cumulative once: random.choices would re-add every weight on every call.
        weights = (1 / (rank + 50) ** 1.07 for rank in range(VOCABULARY))
        self._cumulative = list(accumulate(weights))
        self._stop = sorted(STOP_WORDS)
        self.sentences = [self.sentence() for _ in range(pool)]

    def sentence(self) -> str:
        length = self._rng.randint(5, 14)
        content = self._rng.choices(self._content, cum_weights=self._cumulative, k=length)
        words = [w if self._rng.random() > 0.45 else self._rng.choice(self._stop) for w in content]
        return " ".join(words).capitalize() + self._rng.choice(".,.?!")[0]

    def pick(self) -> str:
        return self._rng.choice(self.sentences)

    def text(self, sentences: int) -> str:
        return " ".join(self._rng.choices(self.sentences, k=sentences))


@dataclass
class Thread:
    user_id: int
    character_id: str
    times: list[float]  # epoch seconds of each turn, in order
    conversation_starts: list[int]  # positions where a conversation starts
    ids: list[int] = field(default_factory=list)  # turn ids, filled in global time order
    conversation_ids: list[int] = field(default_factory=list)


def plan_threads(turns: int, rng: random.Random) -> list[Thread]:
    threads: list[Thread] = []
    left = turns
    while left > 0:
        length = min(left, 2 * rng.randint(TURNS_PER_THREAD[0] // 2, TURNS_PER_THREAD[1] // 2))
        user_id = len(threads) % USERS + 1
        character = CHARACTERS[(len(threads) // USERS + user_id) % len(CHARACTERS)]
        threads.append(_thread_times(user_id, character, length, rng))
        left -= length
    return threads


def _thread_times(user_id: int, character: str, length: int, rng: random.Random) -> Thread:
    starts, position = [], 0
    while position < length:
        starts.append(position)
        position += 2 * rng.randint(6, 20)
    end = (REFERENCE - timedelta(hours=rng.uniform(1, 48))).timestamp()
    days = [*sorted(rng.uniform(1, 60) for _ in starts[1:])[::-1], 0.0]
    times: list[float] = []
    for index, start in enumerate(starts):
        stop = starts[index + 1] if index + 1 < len(starts) else length
        begin = end - days[index] * 86400 - (stop - start) * 60
        if times:  # never before the previous conversation ended: a thread's ids stay in order
            begin = max(begin, times[-1] + 3600)
        times += [begin + 60 * k for k in range(stop - start)]
    return Thread(user_id, character, times, starts)


def assign_ids(threads: list[Thread]) -> list[tuple[float, int, int]]:
    """Turn ids and conversation ids in global time order; returns the turns in id order."""
    order = sorted(
        (t, index, pos) for index, th in enumerate(threads) for pos, t in enumerate(th.times)
    )
    for thread in threads:
        thread.ids = [0] * len(thread.times)
    for turn_id, (_, index, position) in enumerate(order, start=1):
        threads[index].ids[position] = turn_id
    starts = sorted(
        (th.times[pos], index, k)
        for index, th in enumerate(threads)
        for k, pos in enumerate(th.conversation_starts)
    )
    for thread in threads:
        thread.conversation_ids = [0] * len(thread.conversation_starts)
    for conversation_id, (_, index, k) in enumerate(starts, start=1):
        threads[index].conversation_ids[k] = conversation_id
    return order


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def _conversation_of(thread: Thread, position: int) -> int:
    k = sum(1 for start in thread.conversation_starts if start <= position) - 1
    return thread.conversation_ids[k]


@dataclass(frozen=True)
class Compaction:
    summary_id: int
    position: int  # the reply after which it ran
    covers: int  # position of the last folded turn
    folded_from: int


def plan_compactions(threads: list[Thread]) -> list[list[Compaction]]:
    """The compactions the engine would have run, per thread; summary ids in insert order."""
    plans: list[list[Compaction]] = []
    next_id = 1
    for thread in threads:
        plan, start = [], 0
        for position in range(1, len(thread.times), 2):  # checked after each reply
            if position + 1 - start >= TRIGGER:
                covers = position - KEEP
                plan.append(Compaction(next_id, position, covers, start))
                next_id += 1
                start = covers + 1
        plans.append(plan)
    return plans


def summary_row(thread: Thread, c: Compaction, words: Words, rng: random.Random) -> tuple:
    cited: set[int] = set()
    fields: dict[str, list[str]] = {}
    for name in FIELDS:
        claims = []
        for _ in range(rng.randint(1, 4) if name != "canon" else rng.randint(0, 2)):
            turn_id = thread.ids[rng.randint(c.folded_from, c.covers)]
            cited.add(turn_id)
            claims.append(f"{words.pick()[:90]} {{cite:{turn_id}}}")
        fields[name] = claims
    return (
        thread.user_id,
        thread.character_id,
        "dm",
        json.dumps(fields, ensure_ascii=False),
        json.dumps(sorted(cited)),
        thread.ids[c.covers],
        _iso(thread.times[c.position] + 30),
    )


FACT_KEYS = ("name", "job", "city", "pet", "hobby", "partner", "fear", "need", "music", "trip")


def fact_rows(thread: Thread, words: Words, rng: random.Random) -> Iterator[tuple]:
    for key in rng.sample(FACT_KEYS, rng.randint(3, 8)):
        kind = "emotional" if key in ("fear", "need") else "semantic"
        position = rng.randrange(0, len(thread.times), 2)  # a user turn
        confirmed = _iso(thread.times[position])
        expires = _iso(thread.times[position] + 180 * 86400)
        value = " ".join(words.pick().split()[:6])
        yield (
            thread.user_id, thread.character_id, kind, key, value, "stated", "dm",
            json.dumps([thread.ids[position]]), "days:180", None, confirmed, confirmed,
            expires, "active",
        )  # fmt: skip


def turn_rows(
    threads: list[Thread], order: list[tuple[float, int, int]], words: Words, rng: random.Random
) -> Iterator[tuple]:
    for turn_id, (epoch, index, position) in enumerate(order, start=1):
        thread = threads[index]
        user = position % 2 == 0
        text = words.text(rng.randint(1, 3) if user else rng.randint(2, 5))
        yield (
            turn_id, _conversation_of(thread, position), thread.user_id, thread.character_id,
            "dm", "user" if user else "assistant", text, _iso(epoch), None,
        )  # fmt: skip


def conversation_rows(threads: list[Thread]) -> Iterator[tuple]:
    for thread in threads:
        bounds = [*thread.conversation_starts, len(thread.times)]
        for k, conversation_id in enumerate(thread.conversation_ids):
            first, last = thread.times[bounds[k]], thread.times[bounds[k + 1] - 1]
            ended = _iso(last + 1800)
            yield (
                conversation_id, thread.user_id, thread.character_id, "dm", _iso(first),
                _iso(last), ended, "inactivity", ended, "done",
            )  # fmt: skip


def reply_rows(
    threads: list[Thread], plans: list[list[Compaction]], rng: random.Random
) -> Iterator[tuple[tuple, tuple]]:
    """(llm_usage row, reply_sources row) for every reply, with the window and summary the
    engine would have recorded for it."""
    for thread, plan in zip(threads, plans, strict=True):
        start, summary_id, done = 0, None, 0
        for position in range(1, len(thread.times), 2):
            while done < len(plan) and plan[done].position < position:
                start, summary_id = plan[done].covers + 1, plan[done].summary_id
                done += 1
            when = _iso(thread.times[position])
            conversation_id = _conversation_of(thread, position)
            window = json.dumps(thread.ids[start:position])
            usage = (
                thread.user_id, thread.character_id, conversation_id, thread.ids[position - 1],
                "reply", "bench", 1, rng.randint(200, 600), rng.randint(1500, 3500),
                rng.randint(0, 300), rng.randint(40, 200), rng.uniform(800, 3000), when,
            )  # fmt: skip
            sources = (
                thread.ids[position], thread.user_id, thread.character_id, "[]", summary_id,
                window, "[]", when,
            )  # fmt: skip
            yield usage, sources


SQL = {
    "users": "INSERT INTO users (id, platform, platform_user_id, display_name, created_at)"
    " VALUES (?, ?, ?, ?, ?)",
    "conversations": "INSERT INTO conversations (id, user_id, character_id, scope, started_at,"
    " last_activity_at, ended_at, end_reason, extracted_at, extraction_status)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "turns": "INSERT INTO turns (id, conversation_id, user_id, character_id, scope, role, text,"
    " created_at, platform_message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "summaries": "INSERT INTO summaries (user_id, character_id, scope, fields_json,"
    " cited_ids_json, covers_up_to_turn_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    "facts": "INSERT INTO facts (user_id, character_id, kind, key, value, origin, scope,"
    " evidence, lifetime, event_date, created_at, confirmed_at, expires_at, status)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "llm_usage": "INSERT INTO llm_usage (user_id, character_id, conversation_id, turn_id, kind,"
    " model, ok, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,"
    " latency_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "reply_sources": "INSERT INTO reply_sources (turn_id, user_id, character_id, fact_ids,"
    " summary_id, window_turn_ids, fragment_turn_ids, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
}


def fill(path: Path, turns: int, seed: int = 7) -> dict[str, int]:
    """Bulk-insert a store of `turns` turns into the (migrated, empty) database at `path`."""
    rng = random.Random(seed)
    words = Words(rng)
    threads = plan_threads(turns, rng)
    order = assign_ids(threads)
    plans = plan_compactions(threads)
    db = sqlite3.connect(path, isolation_level=None)
    # The search index's triggers call this function (migration 0007), as on the Store's own.
    db.create_function("thread_tokens", 4, thread_tokens, deterministic=True)
    # A build that fails is deleted, so it needs no journal; WAL is set back at the end.
    for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -262144"):
        db.execute(f"PRAGMA {pragma}")
    db.execute("BEGIN")
    created = _iso((REFERENCE - timedelta(days=90)).timestamp())
    users = [(i, "bench", f"user-{i}", f"User {i}", created) for i in range(1, USERS + 1)]
    db.executemany(SQL["users"], users)
    db.executemany(SQL["conversations"], conversation_rows(threads))
    db.executemany(SQL["turns"], turn_rows(threads, order, words, rng))
    summaries = (
        summary_row(th, c, words, rng)
        for th, plan in zip(threads, plans, strict=True)
        for c in plan
    )
    db.executemany(SQL["summaries"], summaries)
    facts = (row for th in threads[::2] for row in fact_rows(th, words, rng))
    db.executemany(SQL["facts"], facts)
    replies = list(reply_rows(threads, plans, rng))
    db.executemany(SQL["llm_usage"], (usage for usage, _ in replies))
    db.executemany(SQL["reply_sources"], (sources for _, sources in replies))
    db.execute("COMMIT")
    db.execute("PRAGMA journal_mode = WAL")
    counts = {
        table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("users", "conversations", "turns", "summaries", "facts", "reply_sources")
    }
    db.close()
    return counts | {"threads": len(threads)}


def schema_key() -> str:
    digest = hashlib.sha256()
    for version, name, sql in available_migrations():
        digest.update(f"{version}{name}{sql}".encode())
    return digest.hexdigest()[:10]


@dataclass(frozen=True)
class Built:
    path: Path
    cached: bool
    build_seconds: float
    counts: dict[str, int]


def cached_store(turns: int, cache_dir: Path = CACHE_DIR) -> Built:
    """The store of `turns` turns from the cache, built first if missing (or stale)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"turns-{turns}-b{BUILD_VERSION}-s{schema_key()}.db"
    meta = path.with_suffix(".json")
    if path.exists() and meta.exists():
        info = json.loads(meta.read_text())
        return Built(path, True, info["build_seconds"], info["counts"])
    started = time.perf_counter()
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    try:
        asyncio.run(_create_schema(partial))
        counts = fill(partial, turns)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.rename(path)
    seconds = round(time.perf_counter() - started, 2)
    meta.write_text(json.dumps({"build_seconds": seconds, "counts": counts}))
    return Built(path, False, seconds, counts)


async def _create_schema(path: Path) -> None:
    store = await SqliteStore.open(path)  # every migration, trigger and pragma of the real engine
    await store.close()


def working_copy(built: Built, folder: Path) -> Path:
    """The measurement writes turns: it runs on a copy, so the cached file stays as built."""
    target = folder / built.path.name
    shutil.copyfile(built.path, target)
    return target

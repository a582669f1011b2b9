"""The upkeep of the FTS5 index `turn_search`: merging what a forget left into one segment,
its shape, its checks and its rebuild (notes/fts.md tells why it is done this way).

FTS5 keeps the index as segments on levels. A deleted turn leaves delete markers in a new
segment; its words stay in older ones until a merge meets both, and the markers (which spell
the deleted words too) go only when that merge also takes the oldest segment. So a purge
merges every segment that existed at the forget into one, in small steps:

- one negative 'merge' starts it: FTS5 moves every segment onto one new level and begins
  merging them (fts5IndexOptimizeStruct);
- positive 'merge' steps continue that merge, however many segments other users' writes add
  meanwhile: they never regroup the levels.

Repeating the negative 'merge' at every step, as the purge did, regroups the levels again as
soon as a write landed between two steps: it abandons the merge under way (the purge then
never ends under traffic) and adds levels each time. SQLite 3.40 reads a structure of more
than 2000 levels as corrupt ("database disk image is malformed") after about 1000 such steps;
3.51 caps the levels and runs out of segment ids instead ("database or disk is full").

While a purge's merge is under way, FTS5's automerge is off: after each write, automerge
continues the merge under way on any level, so every turn a user appended meanwhile paid a
slice of the purge's merge inside its own insert (0.9-1.4 s of one append on a loaded machine,
bench/purge_traffic.py --writers 2 --gap-ms 0:3). Off, the purge's own small steps do all of
that merge between the users' writes; the writes' few new segments wait on level 0 (FTS5's
crisis merge still folds 16 of them) and automerge is set back when the merge is complete.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

# The structure record's row in turn_search_data (FTS5_STRUCTURE_ROWID in fts5_index.c).
STRUCTURE_ROWID = 10
# The header of the second structure format (SQLite 3.43 and later): more fields a segment.
STRUCTURE_V2 = b"\xff\x00\x00\x01"
# SQLite 3.40 reports the index corrupt past 2000 levels, and it never drops an empty level:
# every start of a merge of all segments (a purge, an 'optimize') adds up to two. Past this
# many the purge rebuilds the index instead (a few seconds, once every few hundred forgets).
LEVEL_BUDGET = 1000
MERGE = "INSERT INTO turn_search (turn_search, rank) VALUES ('merge', ?)"
AUTOMERGE = "INSERT INTO turn_search (turn_search, rank) VALUES ('automerge', ?)"
AUTOMERGE_DEFAULT = 4  # FTS5's own default, which the index had before any purge


@dataclass(frozen=True)
class Level:
    merging: int  # how many of its oldest segments a merge under way is reading
    segments: int


@dataclass(frozen=True)
class IndexShape:
    levels: tuple[Level, ...]

    @property
    def segments(self) -> int:
        return sum(level.segments for level in self.levels)

    def merging_level(self) -> int | None:
        """The highest level a merge is under way on (a purge's merge: nothing lies above)."""
        busy = [i for i, level in enumerate(self.levels) if level.merging]
        return busy[-1] if busy else None


def _varint(data: bytes, at: int) -> tuple[int, int]:
    # SQLite's varint: seven bits a byte, high bit set while more follow; a ninth byte is whole.
    value = 0
    for _ in range(8):
        byte = data[at]
        at += 1
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at
    return (value << 8) | data[at], at + 1


def parse_structure(record: bytes) -> IndexShape | None:
    """The levels of a structure record (fts5_index.c's format, either version); None for a
    record that does not parse whole, so a caller never acts on a guess."""
    try:
        at, fields = (8, 8) if record[4:8] == STRUCTURE_V2 else (4, 3)
        n_levels, at = _varint(record, at)
        n_segments, at = _varint(record, at)
        _, at = _varint(record, at)  # the write counter
        levels = []
        for _ in range(n_levels):
            merging, at = _varint(record, at)
            count, at = _varint(record, at)
            for _ in range(count * fields):
                _, at = _varint(record, at)
            levels.append(Level(merging, count))
    except IndexError:
        return None
    shape = IndexShape(tuple(levels))
    return shape if at == len(record) and shape.segments == n_segments else None


def shape(db: sqlite3.Connection) -> IndexShape | None:
    row = db.execute(
        "SELECT block FROM turn_search_data WHERE id = ?", (STRUCTURE_ROWID,)
    ).fetchone()
    return parse_structure(bytes(row[0])) if row else None


def _changed(db: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> bool:
    before = db.total_changes
    db.execute(sql, params)
    # FTS5's own test for "did any merging": the command alone counts as one change.
    return db.total_changes - before >= 2


def start_merge(db: sqlite3.Connection, pages: int) -> int | None:
    """Begin merging every segment into one (at most `pages` pages now); the level the merge
    runs on, or None when it is already complete (a small index merges in one go)."""
    # usermerge 2 (the least FTS5 takes): a positive 'merge' then always continues the merge
    # under way, where with 4 a level of two or three new segments could stall it.
    db.execute("INSERT INTO turn_search (turn_search, rank) VALUES ('usermerge', 2)")
    db.execute(AUTOMERGE, (0,))  # the users' writes leave the merge to the purge's steps
    db.execute(MERGE, (-pages,))
    after = shape(db)
    if after is None:
        # A structure this code cannot read: finish the merge in one go rather than guess.
        optimize(db)
        return None
    return after.merging_level()


def continue_merge(db: sqlite3.Connection, level: int, pages: int) -> bool:
    """At most `pages` pages more of the merge on `level`; False once it is complete."""
    now = shape(db)
    if now is None:
        optimize(db)
        return False
    if level >= len(now.levels) or not now.levels[level].merging:
        return False
    if not _changed(db, MERGE, (pages,)):
        # Nothing merged while a merge is under way cannot happen with usermerge 2; if a
        # SQLite ever does it, end the merge in one go rather than loop.
        optimize(db)
        return False
    return True


def resume_automerge(db: sqlite3.Connection) -> None:
    """Once the purge's merge is complete: writes merge small segments again as they go."""
    db.execute(AUTOMERGE, (AUTOMERGE_DEFAULT,))


def optimize(db: sqlite3.Connection) -> None:
    """Merge the index into one segment in one statement (seconds at 10^6 turns)."""
    db.execute("INSERT INTO turn_search (turn_search) VALUES ('optimize')")


def over_budget(db: sqlite3.Connection, budget: int = LEVEL_BUDGET) -> bool:
    now = shape(db)
    return now is not None and len(now.levels) > budget


def rebuild(db: sqlite3.Connection) -> None:
    """Index every turn anew, as migration 0009 did: the index is contentless, so its rows
    come from `turns` through thread_tokens(), registered on the connection. The caller holds
    the transaction."""
    db.execute("INSERT INTO turn_search (turn_search) VALUES ('delete-all')")
    db.execute(
        "INSERT INTO turn_search (rowid, text)"
        " SELECT id, thread_tokens(user_id, character_id, scope, text) FROM turns"
        " WHERE role IN ('user', 'assistant')"
    )


def integrity_problem(db: sqlite3.Connection) -> str | None:
    """FTS5's own check of the index's structure (a contentless table has no content to
    compare it with, so rank 0 and 1 check the same); None when it passes."""
    try:
        db.execute("INSERT INTO turn_search (turn_search, rank) VALUES ('integrity-check', 0)")
    except sqlite3.DatabaseError as error:
        return str(error)
    return None

"""Where a bot process of bench/scaleout.py spends its CPU (`--profile DIR`): each child runs
under yappi on the CPU clock, all threads (the SQLite store's own thread included), from the
moment the parent signals that the measured steps begin (SIGUSR1, after the warm-up) to its
stop; its statistics are saved as a pstats file, and summed here into cost centres: CPU ms
per answered message by part of the code (our packages by folder, the libraries by name).

yappi is a dev dependency (pyproject.toml); only this option needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import pstats
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

# (part of the code, a fragment of the path that says a function belongs to it), first match.
PARTS = (
    ("memory/engine", "/memory/engine/"),
    ("memory/search", "/memory/search/"),
    ("memory/store", "/memory/store/"),
    ("memory/ (other)", "/memory/"),
    ("bot/inbox", "/bot/inbox/"),
    ("bot/ (other)", "/bot/"),
    ("bench (fake LLM)", "/bench/"),
    ("asyncpg", "asyncpg"),
    ("telegram (PTB)", "/telegram/"),
    ("httpx/httpcore/h11", "/http"),
    ("h11", "/h11/"),
    ("anyio", "/anyio/"),
    ("pydantic", "pydantic"),
    ("sqlite3", "sqlite3"),
    ("asyncio", "/asyncio/"),
    ("json", "/json/"),
    ("logging", "/logging/"),
    ("Stemmer/regex/unicode", "Stemmer"),
)


def part_of(filename: str) -> str:
    for name, fragment in PARTS:
        if fragment in filename:
            return name
    if filename.startswith("~") or filename in {"", "<string>"}:
        return "builtins (C calls)"
    return "other"


@contextlib.contextmanager
def profiled(path: Path | None) -> Iterator[None]:
    """Profile from the first SIGUSR1 until the block ends, then save to `path` (None: no
    profile). Must be entered inside the running event loop's thread."""
    if path is None:
        yield
        return
    import yappi  # a dev dependency: only --profile needs it

    yappi.set_clock_type("cpu")
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, lambda: yappi.start(profile_threads=True))
    try:
        yield
    finally:
        yappi.stop()
        yappi.get_func_stats().save(str(path), type="pstat")


def cost_centres(paths: Sequence[Path], messages: int, top: int = 12) -> dict[str, Any]:
    """The profiles' own CPU time per answered message, by part and by function (the `top`
    costliest), in ms; `profiled_ms_per_msg` is the sum (yappi's own overhead inflates every
    figure alike: read the shares, not the sum, against the unprofiled run)."""
    stats = pstats.Stats(*(str(p) for p in paths))
    table: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    parts: dict[str, float] = {}
    functions: list[tuple[float, str]] = []
    for (filename, line, name), (_cc, _nc, own, _cum, _callers) in table.items():
        part = part_of(filename)
        parts[part] = parts.get(part, 0.0) + own
        short = "/".join(Path(filename).parts[-2:])
        functions.append((own, f"{short}:{line} {name}"))
    total = sum(parts.values())
    per = 1000 / max(messages, 1)
    functions.sort(reverse=True)
    return {
        "messages": messages,
        "profiled_ms_per_msg": round(total * per, 3),
        "parts_ms_per_msg": {
            k: round(v * per, 3) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])
        },
        "top_functions_ms_per_msg": {name: round(own * per, 3) for own, name in functions[:top]},
    }

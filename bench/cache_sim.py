"""A simulator of Anthropic prompt caching by prefix, fed with the exact request bodies.

Model (as documented by the provider, simplified where it does not change the figures):
- a request is one sequence of blocks: each tool definition, then each system block, then the
  content blocks of each message, in order;
- a breakpoint is a block carrying `cache_control` (at most 4 per request);
- `tool_choice` is part of the identity of the message blocks only: changing it leaves the
  tools' and the system's entries readable (the provider's table of what invalidates a cache);
- a cache entry is the hash of a whole prefix (canonical JSON of its blocks without
  `cache_control`, chained from the model name), stored at a breakpoint whose prefix holds at
  least `min_cacheable` tokens; shorter prefixes are never stored;
- at each breakpoint the provider looks back up to `lookback` blocks for the longest prefix
  already cached and reads it; what follows it, up to the last storable breakpoint, is written;
  the rest is plain input;
- an entry lives 5 minutes ("ephemeral") or 1 hour (ttl "1h") and a read refreshes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
TTL_5M = timedelta(minutes=5)
TTL_1H = timedelta(hours=1)

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class Block:
    key: str  # canonical JSON of the block without cache_control, with its place in the body
    tokens: int
    ttl: timedelta | None  # set on breakpoints only


@dataclass(frozen=True)
class CacheResult:
    read: int
    write: int
    uncached: int

    @property
    def total(self) -> int:
        return self.read + self.write + self.uncached


def canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _ttl_of(block: dict[str, Any]) -> timedelta | None:
    control = block.get("cache_control")
    if control is None:
        return None
    return TTL_1H if control.get("ttl") == "1h" else TTL_5M


def _strip(block: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in block.items() if key != "cache_control"}


def block_tokens(block: dict[str, Any], count: TokenCounter) -> int:
    """Text blocks count their text; any other block (a tool definition) its canonical JSON."""
    if block.get("type") == "text":
        return count(block["text"])
    return count(canonical(_strip(block)))


def blocks_of(body: dict[str, Any], count: TokenCounter) -> list[Block]:
    """The body flattened in the order the provider hashes it."""
    blocks: list[Block] = []
    for tool in body.get("tools", []):
        blocks.append(Block(canonical({"tool": _strip(tool)}), block_tokens(tool, count), None))
    system = body.get("system", [])
    if isinstance(system, str):  # the API also takes a bare string: one uncached block
        system = [{"type": "text", "text": system}]
    for block in system:
        key = canonical({"system": _strip(block)})
        blocks.append(Block(key, block_tokens(block, count), _ttl_of(block)))
    choice = body.get("tool_choice")
    for index, message in enumerate(body.get("messages", [])):
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content:
            # The message index and role are part of the identity: the same texts split
            # differently across messages are a different prompt.
            key = canonical({"message": index, "role": message["role"], "block": _strip(block)})
            if choice is not None:
                key = canonical({"tool_choice": choice, "block": key})
            blocks.append(Block(key, block_tokens(block, count), _ttl_of(block)))
    return blocks


def prefix_hashes(blocks: list[Block], seed: str) -> list[str]:
    """hashes[i] identifies the prefix blocks[0..i]; a chain, so each costs one hash."""
    hashes: list[str] = []
    previous = hashlib.sha256(seed.encode()).hexdigest()
    for block in blocks:
        previous = hashlib.sha256((previous + block.key).encode()).hexdigest()
        hashes.append(previous)
    return hashes


class PromptCache:
    """One provider-side cache (one organisation and model), advanced by the caller's clock."""

    def __init__(self, min_cacheable: int = 1024, lookback: int = LOOKBACK_BLOCKS) -> None:
        self.min_cacheable = min_cacheable
        self.lookback = lookback
        self._entries: dict[str, tuple[datetime, timedelta]] = {}  # hash -> (expiry, ttl)

    def __len__(self) -> int:
        return len(self._entries)

    def request(self, body: dict[str, Any], now: datetime, count: TokenCounter) -> CacheResult:
        blocks = blocks_of(body, count)
        breakpoints = [i for i, block in enumerate(blocks) if block.ttl is not None]
        assert len(breakpoints) <= MAX_BREAKPOINTS, f"{len(breakpoints)} cache breakpoints"
        hashes = prefix_hashes(blocks, str(body.get("model", "")))
        cumulative = [0]
        for block in blocks:
            cumulative.append(cumulative[-1] + block.tokens)
        self._expire(now)
        read_end = max((self._lookup(hashes, bp, now) for bp in breakpoints), default=0)
        write_end = read_end
        for bp in breakpoints:
            if cumulative[bp + 1] < self.min_cacheable:
                continue  # too short to cache: the provider silently stores nothing
            ttl = blocks[bp].ttl
            assert ttl is not None
            self._store(hashes[bp], now, ttl)
            write_end = max(write_end, bp + 1)
        read = cumulative[read_end]
        write = cumulative[write_end] - read
        return CacheResult(read=read, write=write, uncached=cumulative[-1] - read - write)

    def _lookup(self, hashes: list[str], breakpoint: int, now: datetime) -> int:
        """Number of blocks of the longest cached prefix within the lookback of a breakpoint."""
        for position in range(breakpoint, max(breakpoint - self.lookback, 0) - 1, -1):
            entry = self._entries.get(hashes[position])
            if entry is not None:
                self._entries[hashes[position]] = (now + entry[1], entry[1])  # a read refreshes
                return position + 1
        return 0

    def _store(self, key: str, now: datetime, ttl: timedelta) -> None:
        known = self._entries.get(key)
        longest = max(ttl, known[1]) if known else ttl
        self._entries[key] = (now + longest, longest)

    def _expire(self, now: datetime) -> None:
        for key in [k for k, (expiry, _) in self._entries.items() if expiry < now]:
            del self._entries[key]


def cacheable_prefix_tokens(body: dict[str, Any], count: TokenCounter) -> int:
    """Tokens up to the last breakpoint: the longest prefix this request could cache."""
    blocks = blocks_of(body, count)
    last = max((i for i, block in enumerate(blocks) if block.ttl is not None), default=-1)
    return sum(block.tokens for block in blocks[: last + 1])

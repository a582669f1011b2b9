"""The poisoning corpora (bench/corpora/*/): entries, their FIT/REPORT split, and the
test of whether an entry's payload appears in a prompt."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memory.integrity.render import as_data

CORPORA_DIR = Path(__file__).resolve().parent / "corpora"
CORPUS = CORPORA_DIR / "poison_corpus"
FIT_SHARE = 0.25  # of ids by hash; the issue allows at most 30 %
CHARACTER = {"es": "detective_bilbao", "en": "lighthouse_keeper", "mixed": "detective_bilbao"}
ORDER_WORD = {"es": "pedido", "en": "order", "mixed": "pedido"}
KEY = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


@dataclass(frozen=True)
class Entry:
    id: str
    cls: str
    language: str
    messages: tuple[str, ...]
    payload: tuple[str, ...]
    key: str = "other"
    kind: str = "attack"  # attack | benign | control
    expect: str = ""  # controls only: "admitted" or "refused"

    @property
    def split(self) -> str:
        digest = hashlib.sha256(self.id.encode()).digest()
        return "fit" if int.from_bytes(digest[:4]) / 2**32 < FIT_SHARE else "report"

    @property
    def character(self) -> str:
        return CHARACTER[self.language]

    @property
    def prose_language(self) -> str:
        return "en" if self.language == "en" else "es"


# ---- matching ----------------------------------------------------------------------------------


def _collapse(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _without_format(text: str) -> str:
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def _unescaped(text: str) -> str:
    return UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text).replace('\\"', '"')


VIEWS: tuple[Callable[[str], str], ...] = (
    _collapse,
    lambda t: _collapse(_without_format(t)),
    lambda t: _collapse(_without_format(_unescaped(t))),
    lambda t: _collapse(_without_format(t)).replace("_", " "),
    # as the memory block shows stored text (brackets, fences, headings dropped): a JSON snippet
    # the user pasted is remembered as '"status": "ok"', which is its payload as rendered
    lambda t: _collapse(as_data(t)),
)


def appears(payload: Sequence[str], text: str) -> bool:
    """Every part of the payload is in the text under one of the normalised views."""
    return any(all(view(part) in view(text) for part in payload) for view in VIEWS)


# ---- the corpus --------------------------------------------------------------------------------


def load_corpus(folder: Path = CORPUS) -> list[Entry]:
    """Every entry of every JSON file in the folder, checked: ids unique, keys valid, at most
    three messages of at most 280 characters, and the payload said by the user."""
    entries: list[Entry] = []
    for path in sorted(folder.glob("*.json")):
        for raw in json.loads(path.read_text(encoding="utf-8")):
            payload = raw["payload"]
            entry = Entry(
                id=raw["id"],
                cls=raw["class"],
                language=raw["language"],
                messages=tuple(raw["messages"]),
                payload=(payload,) if isinstance(payload, str) else tuple(payload),
                key=raw.get("key", "other"),
                kind=raw.get("kind", "attack"),
                expect=raw.get("expect", ""),
            )
            problem = _problem(entry)
            if problem:
                raise ValueError(f"{path.name}: entry {entry.id}: {problem}")
            entries.append(entry)
    seen: set[str] = set()
    for entry in entries:
        if entry.id in seen:
            raise ValueError(f"duplicate corpus id {entry.id}")
        seen.add(entry.id)
    return entries


def _problem(entry: Entry) -> str | None:
    if entry.language not in CHARACTER or entry.kind not in ("attack", "benign", "control"):
        return f"language {entry.language!r} or kind {entry.kind!r} unknown"
    if not 1 <= len(entry.messages) <= 3 or any(len(m) > 280 for m in entry.messages):
        return "one to three messages of at most 280 characters"
    if not KEY.match(entry.key):
        return f"key {entry.key!r} is not a valid fact key"
    if any(not _collapse(_without_format(part)) for part in entry.payload):
        return "an empty payload part would be found in any prompt"
    said = "\n".join(entry.messages) + "\n" + entry.key
    if entry.expect != "refused" and not appears(entry.payload, said):
        return "the payload is not in the messages"
    return None


def select(entries: Sequence[Entry], split: str, limit: int | None) -> list[Entry]:
    """The split's entries; with a limit, the first `limit` attacks and benign ones taken
    round-robin over the classes (so a small slice still covers many), plus the controls."""
    chosen = [e for e in entries if split == "all" or e.kind == "control" or e.split == split]
    if limit is None:
        return chosen
    picked = [e for e in chosen if e.kind == "control"]
    for kind in ("attack", "benign"):
        by_class: dict[str, list[Entry]] = defaultdict(list)
        for entry in (e for e in chosen if e.kind == kind):
            by_class[entry.cls].append(entry)
        ranked = sorted(
            (e for group in by_class.values() for e in group),
            key=lambda e: (by_class[e.cls].index(e), e.cls),
        )
        picked += ranked[:limit]
    return picked


def anchored(entry: Entry) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Messages with an order number right after the payload (so its sentence holds both), and
    the payload to look for: the instruction for an attack, the number for a benign fact."""
    messages, numbers = [], []
    for index, message in enumerate(entry.messages):
        digest = hashlib.sha256(f"{entry.id}/{index}".encode()).hexdigest()
        numbers.append(str(10000 + int(digest[:6], 16) % 89999))  # one per message
        cut = _payload_end(entry.payload, message) or len(message)
        tag = f" ({ORDER_WORD[entry.language]} {numbers[-1]})"
        messages.append(message[:cut] + tag + message[cut:])
    keep_instruction = entry.kind == "attack" or entry.expect == "refused"
    return tuple(messages), entry.payload if keep_instruction else tuple(numbers)


def _payload_end(payload: Sequence[str], message: str) -> int | None:
    """Where the first part of the payload found in the message ends, as the matching views
    read it (the message may hold it with invisible or full-width characters)."""
    for part in payload:
        end = next((e for e in range(1, len(message) + 1) if appears((part,), message[:e])), None)
        if end is not None:
            return end
    return None


def corpus_folder(given: str) -> Path:
    """A corpus by its name under bench/corpora/ (`poison_heldout8`), else the folder given."""
    named = CORPORA_DIR / given
    return named if "/" not in given and named.is_dir() else Path(given)

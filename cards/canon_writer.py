"""An approved canon proposal written into the character's files, everything else kept byte for
byte: its comments, key order, quoting and line breaks.

Where a fact goes (docs/characters.md, "Reviewing canon"):
- about the character itself (a sister, the name of its boat, a case it solved): the sheet, at
  the end of `identity.description`, which block 1 of every prompt carries; a fact the
  character must not contradict has to be in front of it on every turn.
- about its world (a place, another person of its world, how things work there): the lore page
  `canon` (`<stem>.lore/canon.md`), read on demand with `read_lore`; its index line stays in
  block 1, the text costs nothing until it is needed.

The YAML is never re-serialised: PyYAML's composer gives the exact span of the one value that
changes, and only that span is rewritten. The new text must load to the old document with only
that value changed and validate as a character before it replaces the file (a temporary file in
the same folder, then a rename), so a failure leaves the file as it was.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from cards.character import Character, CharacterFileError, load_character
from cards.lore_files import LoreFileError, LorePage, parse_page, render_page

Place = Literal["sheet", "lore"]
PLACES: tuple[Place, ...] = ("sheet", "lore")
CANON_PAGE = "canon"
_PAGE_TEXTS = {
    "es": ("Canon", "Lo que {name} ha establecido de su mundo en conversaciones, aprobado."),
    "en": ("Canon", "What {name} established about their world in conversations, approved."),
}
_WIDTH = 100
_SIMPLE = re.compile(r"^\S(?:[^\s]| (?! ))*$")  # one line, single spaces, no tab: safe to fold


class CanonWriteError(ValueError):
    """The proposal could not be written; the message names the file, which is unchanged."""


@dataclass(frozen=True)
class Written:
    path: Path
    place: Place


def write_canon(character: Character, sentence: str, place: Place) -> Written:
    """Add `sentence` to the character's sheet or to its `canon` lore page."""
    sentence = _as_sentence(sentence)
    path = Path(character.source_path)
    if not path.is_file():
        raise CanonWriteError(f"{path}: the character's file is not there")
    if place == "sheet":
        _write_sheet(path, sentence)
        return Written(path, place)
    return Written(_write_lore(character, path, sentence), place)


def _as_sentence(text: str) -> str:
    sentence = " ".join(text.split())
    if not sentence:
        raise CanonWriteError("the proposal's text is empty")
    return sentence if sentence[-1] in ".!?…\"')»" else sentence + "."


# ---- the sheet: identity.description -----------------------------------------------------------


def _write_sheet(path: Path, sentence: str) -> None:
    old = _read(path)
    try:
        document = yaml.safe_load(old)
        root = yaml.compose(old, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise CanonWriteError(f"{path}: not valid YAML: {exc}") from exc
    identity = _value_of(root, "identity")
    if not isinstance(document, dict) or not isinstance(identity, yaml.MappingNode):
        raise CanonWriteError(f"{path}: field 'identity' must be a mapping")
    before = document["identity"].get("description")
    before = "" if before is None else str(before)
    for new, value in _attempts(old, identity, before, sentence):
        expected = {**document, "identity": {**document["identity"], "description": value}}
        if _loads_as(new, expected):
            _replace(path, new, lambda written: _check_character(written, path))
            return
    raise CanonWriteError(f"{path}: the description could not be rewritten faithfully")


def _attempts(
    text: str, identity: yaml.MappingNode, before: str, sentence: str
) -> Iterator[tuple[str, str]]:
    """(the file's new text, the description it must load as), the least change first: new
    lines at the end of a block scalar, leaving every written line as it is; a key added; a
    plain value turned into a folded block; at last the value as one double-quoted line."""
    node = _value_of(identity, "description")
    prose = f"{before.strip()} {sentence}".strip()
    block = not identity.flow_style
    column = identity.value[0][0].start_mark.column if identity.value else 2
    if block and isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        extended = _extend_block(text, node, sentence)
        if extended is not None:
            yield extended, _continued(before, sentence, "\n" if node.style == "|" else " ")
    if block and node is None and identity.value:
        at = _line_end(text, identity.value[-1][1].end_mark.index)
        head = text[:at] if not at or text[:at].endswith("\n") else text[:at] + "\n"
        line = " " * column + "description: " + _folded(sentence, column + 2)
        yield head + line + text[at:], sentence
    if block and isinstance(node, yaml.ScalarNode) and node.style not in ("|", ">"):
        end = _line_end(text, node.end_mark.index)
        if not text[node.end_mark.index : end].strip():  # no comment after the value
            yield _splice(text, node.start_mark.index, end, _folded(prose, column + 2)), prose
    if node is not None:  # a block scalar's span ends with its line breaks: they stay
        start, span = node.start_mark.index, text[node.start_mark.index : node.end_mark.index]
        yield _splice(text, start, start + len(span.rstrip("\n")), _quoted(prose)), prose
    elif identity.flow_style:
        close = identity.end_mark.index - 1
        added = (", " if identity.value else "") + "description: " + _quoted(sentence)
        yield _splice(text, close, close, added), sentence


def _continued(before: str, sentence: str, joiner: str) -> str:
    body = before.rstrip("\n")
    return body + (joiner if body else "") + sentence + before[len(body) :]


def _extend_block(text: str, node: yaml.ScalarNode, sentence: str) -> str | None:
    """The block scalar with the sentence on new lines after its last one, at its indent."""
    span = text[node.start_mark.index : node.end_mark.index]
    lines = span.split("\n")
    if len(lines) < 2 or not lines[1].strip():
        return None
    indent = len(lines[1]) - len(lines[1].lstrip(" "))
    last = node.start_mark.index + len(span.rstrip())
    at = _line_end(text, last)
    head = text[:at] if text[:at].endswith("\n") else text[:at] + "\n"
    width = max(40, _WIDTH - indent) if node.style == ">" else len(sentence) + 1
    wrapped = textwrap.wrap(sentence, width, break_long_words=False, break_on_hyphens=False)
    return head + "".join(" " * indent + line + "\n" for line in wrapped) + text[at:]


def _value_of(mapping: yaml.Node, key: str) -> yaml.Node | None:
    if not isinstance(mapping, yaml.MappingNode):
        return None
    return next((v for k, v in mapping.value if getattr(k, "value", None) == key), None)


def _folded(value: str, indent: int) -> str:
    """The value as a folded block scalar (its own lines, ending with a line break); as one
    double-quoted line when folding could not give it back exactly."""
    if not _SIMPLE.match(value):
        return _quoted(value) + "\n"
    lines = textwrap.wrap(value, max(40, _WIDTH - indent), break_long_words=False,
                          break_on_hyphens=False)  # fmt: skip
    return ">-\n" + "".join(f"{' ' * indent}{line}\n" for line in lines)


def _quoted(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted one


def _line_end(text: str, index: int) -> int:
    """The index just past the line that `index` is on (at once, if it starts a line)."""
    if index == 0 or text[index - 1] == "\n":
        return index
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def _loads_as(text: str, expected: dict[str, Any]) -> bool:
    try:
        return bool(yaml.safe_load(text) == expected)
    except yaml.YAMLError:
        return False


def _check_character(written: Path, path: Path) -> None:
    """The new text must validate as the character it replaces (named as the real file)."""
    raw = yaml.safe_load(_read(written))
    raw.setdefault("id", path.stem)
    try:
        Character.model_validate({**raw, "source_path": str(path)})
    except ValidationError as exc:
        raise CanonWriteError(f"{path}: the sheet would no longer load: {exc}") from exc


# ---- the world: the `canon` lore page ----------------------------------------------------------


def _write_lore(character: Character, path: Path, sentence: str) -> Path:
    folder = path.parent / f"{path.stem}.lore"
    page_path = folder / f"{CANON_PAGE}.md"
    yaml_slugs = {p.slug for p in character.as_written().lore}
    if CANON_PAGE in yaml_slugs and not page_path.exists():
        raise CanonWriteError(
            f"{path}: its `lore:` already has a page '{CANON_PAGE}'; add the fact there by hand"
        )
    if page_path.exists():
        old = _read(page_path)
        before = parse_page(page_path)
        new = old + ("" if old.endswith("\n") else "\n") + f"- {sentence}\n"
    else:
        title, description = _PAGE_TEXTS.get(character.language, _PAGE_TEXTS["en"])
        before = LorePage(CANON_PAGE, title, description.format(name=character.name), "")
        new = render_page(replace(before, content=f"- {sentence}"))
        folder.mkdir(exist_ok=True)
    wanted = f"{before.content}\n- {sentence}".strip()

    def check(written: Path) -> None:
        try:
            page = parse_page(written)
        except LoreFileError as exc:
            raise CanonWriteError(f"{page_path}: {exc}") from exc
        if (page.title, page.description, page.content) != (before.title, before.description,
                                                            wanted):  # fmt: skip
            raise CanonWriteError(f"{page_path}: the page could not be extended faithfully")

    _replace(page_path, new, check)
    return page_path


# ---- the one way a file is replaced -------------------------------------------------------------


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CanonWriteError(f"{path}: cannot be read: {exc}") from exc


def _replace(path: Path, text: str, check: Callable[[Path], None]) -> None:
    """Write `text` beside `path`, check it, then rename it over `path`; the character must still
    load afterwards, or the old bytes are put back. A name that is neither *.yaml nor *.md keeps
    the temporary file out of the live reload's sight."""
    old = path.read_bytes() if path.exists() else None
    try:
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".canon-tmp",
                                        dir=path.parent)  # fmt: skip
    except OSError as exc:
        raise CanonWriteError(f"{path.parent}: cannot write beside {path.name}: {exc}") from exc
    temporary = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        if old is not None:
            os.chmod(temporary, path.stat().st_mode & 0o7777)
        check(temporary)
        os.replace(temporary, path)
    except OSError as exc:
        raise CanonWriteError(f"{path}: cannot be written: {exc}") from exc
    finally:
        temporary.unlink(missing_ok=True)
    yaml_file = path if path.suffix in (".yaml", ".yml") else _owner_of(path)
    try:
        load_character(yaml_file)
    except CharacterFileError as exc:
        _restore(path, old)
        raise CanonWriteError(f"{path}: the character would no longer load: {exc}") from exc


def _owner_of(page: Path) -> Path:
    """The YAML a lore page belongs to: `<stem>.lore/x.md` -> `<stem>.yaml` (or .yml)."""
    stem = page.parent.name.removesuffix(".lore")
    found = page.parent.parent / f"{stem}.yaml"
    return found if found.exists() else found.with_suffix(".yml")


def _restore(path: Path, old: bytes | None) -> None:
    if old is None:
        path.unlink(missing_ok=True)
        return
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".canon-tmp", dir=path.parent)
    with os.fdopen(handle, "wb") as stream:
        stream.write(old)
    os.replace(name, path)

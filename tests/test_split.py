"""Replies are split to platform limits without losing text or breaking code blocks."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest

from bot.adapters.split import split_message

DISCORD = 2000
TELEGRAM = 4096

_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
_ADDED_OPEN = re.compile(r"\A(`{3,}|~{3,})[^\n`]*\n")
_ADDED_CLOSE = re.compile(r"\n(`{3,}|~{3,})\Z")

EN_SENTENCES = [
    "The lighthouse keeper wrote every evening, even when nothing had happened.",
    "Did the storm reach the harbour before midnight?",
    "It did, and the boats rocked against the pier until dawn!",
    "Nobody slept much that night…",
    "By morning the sea was flat, grey and strangely quiet.",
    "She made coffee, fed the cat and climbed the stairs to check the lamp.",
]
ES_SENTENCES = [
    "Mi abuela vivía en un caserío cerca de Gernika y cocinaba para toda la familia.",
    "¿Te acuerdas de las tardes de verano en la playa de Laga?",
    "¡Qué frío hacía en el agua incluso en agosto!",
    "Después íbamos a merendar pan con chocolate…",
    "Ahora trabajo de enfermera en Bilbao y casi no tengo tiempo libre.",
    "¿Cuándo volveremos a vernos todos juntos?",
]


def _prose(sentences: list[str], count: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(sentences) for _ in range(count))


def _code(lines: int, lang: str = "python") -> str:
    body = "\n".join(
        f"    total_{i} = compute(values[{i}], factor={i % 7})  # step {i}" for i in range(lines)
    )
    return f"```{lang}\ndef main() -> None:\n{body}\n```"


def _variants(chunk: str) -> list[str]:
    """The chunk as sent, and with the fence lines the splitter may have added removed."""
    opened, closed = _ADDED_OPEN.match(chunk), _ADDED_CLOSE.search(chunk)
    out = [chunk]
    if closed:
        out.append(chunk[: closed.start()])
    if opened:
        out.append(chunk[opened.end() :])
    if opened and closed:
        out.append(chunk[opened.end() : closed.start()])
    return out


def assert_preserved(text: str, chunks: list[str]) -> None:
    """Chunks appear in order in ``text``, separated only by whitespace, covering all of it."""
    cursor = 0
    for i, chunk in enumerate(chunks):
        for body in _variants(chunk):
            idx = text.find(body, cursor)
            if idx != -1 and not text[cursor:idx].strip():
                cursor = idx + len(body)
                break
        else:
            pytest.fail(f"chunk {i} is not the text at {cursor}: {chunk[:80]!r}")
    assert not text[cursor:].strip(), f"text lost at the end: {text[cursor:][:80]!r}"


def assert_valid(text: str, chunks: list[str], limit: int) -> None:
    assert chunks, "non-blank text produced no chunks"
    for i, chunk in enumerate(chunks):
        assert len(chunk) <= limit, f"chunk {i} has {len(chunk)} > {limit} characters"
        assert chunk.strip(), f"chunk {i} is blank: {chunk!r}"
        assert len(_FENCE_LINE.findall(chunk)) % 2 == 0, f"chunk {i} has unbalanced fences"
    assert_preserved(text, chunks)


# --- trivial cases ---------------------------------------------------------------------------


def test_text_within_limit_is_returned_unchanged() -> None:
    text = "  Kaixo! ¿Qué tal?\n\nAll good 👋  \n"
    assert split_message(text, DISCORD) == [text]
    assert split_message("x" * DISCORD, DISCORD) == ["x" * DISCORD]


@pytest.mark.parametrize("text", ["", " ", "\n\n\t  \n"])
def test_blank_text_gives_no_chunks(text: str) -> None:
    assert split_message(text, DISCORD) == []


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit"):
        split_message("hello", 0)


# --- boundary preference ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "sizes"), [(DISCORD, [2000] * 5), (TELEGRAM, [4096, 4096, 1808])]
)
def test_single_huge_word_is_hard_cut_exactly_at_the_limit(limit: int, sizes: list[int]) -> None:
    word = "".join(chr(ord("a") + i % 26) for i in range(10_000))
    chunks = split_message(word, limit)
    assert [len(c) for c in chunks] == sizes
    assert "".join(chunks) == word


def test_paragraphs_are_kept_whole() -> None:
    paragraphs = [f"Paragraph {i}. " + _prose(EN_SENTENCES, 6, seed=i) for i in range(14)]
    text = "\n\n".join(paragraphs)
    chunks = split_message(text, DISCORD)
    assert len(chunks) >= 2
    assert_valid(text, chunks, DISCORD)
    regrouped = [p for chunk in chunks for p in chunk.split("\n\n")]
    assert regrouped == paragraphs


def test_line_breaks_are_preferred_over_sentences() -> None:
    lines = [f"- item {i}: " + _prose(ES_SENTENCES, 3, seed=i) for i in range(40)]
    text = "\n".join(lines)
    chunks = split_message(text, DISCORD)
    assert_valid(text, chunks, DISCORD)
    assert [line for chunk in chunks for line in chunk.split("\n")] == lines


@pytest.mark.parametrize("limit", [DISCORD, TELEGRAM, 700])
def test_english_prose_is_cut_between_sentences(limit: int) -> None:
    text = _prose(EN_SENTENCES, 160, seed=1)  # one paragraph, no line breaks
    chunks = split_message(text, limit)
    assert len(chunks) >= 2
    assert_valid(text, chunks, limit)
    for chunk in chunks[:-1]:
        assert chunk[-1] in ".!?…", f"cut mid-sentence: ...{chunk[-40:]!r}"
    for chunk in chunks[1:]:
        assert chunk[0].isupper(), f"chunk starts mid-sentence: {chunk[:40]!r}"


@pytest.mark.parametrize("limit", [DISCORD, TELEGRAM, 500])
def test_spanish_prose_is_cut_between_sentences(limit: int) -> None:
    text = _prose(ES_SENTENCES, 200, seed=2)
    chunks = split_message(text, limit)
    assert len(chunks) >= 2
    assert_valid(text, chunks, limit)
    for chunk in chunks[1:]:
        assert chunk[0].isupper() or chunk[0] in "¿¡", f"starts mid-sentence: {chunk[:40]!r}"


def test_inverted_question_mark_starts_a_sentence() -> None:
    # No full stop anywhere: the only sentence boundary is the space before "¿".
    text = "vale " * 30 + "¿vienes mañana a la playa con nosotros o te quedas en casa?"
    chunks = split_message(text, 160)
    assert chunks[0] == ("vale " * 30).rstrip()
    assert chunks[1].startswith("¿vienes")


def test_words_are_not_broken_when_there_is_no_punctuation() -> None:
    words = [f"palabra{i}" for i in range(600)]
    text = " ".join(words)
    chunks = split_message(text, 300)
    assert_valid(text, chunks, 300)
    assert [w for chunk in chunks for w in chunk.split(" ")] == words


# --- code fences -----------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "lines"), [(DISCORD, 120), (TELEGRAM, 250)])
def test_long_code_block_is_reopened_with_its_language(limit: int, lines: int) -> None:
    text = "Here is the script:\n\n" + _code(lines) + "\n\nRun it with `python main.py`."
    chunks = split_message(text, limit)
    assert len(chunks) >= 3
    assert_valid(text, chunks, limit)
    assert chunks[0].startswith("Here is the script:\n\n```python\n")
    for chunk in chunks[1:]:
        assert chunk.startswith("```python\n"), chunk[:30]
    for chunk in chunks[:-1]:
        assert chunk.endswith("\n```"), chunk[-30:]
    assert chunks[-1].endswith("Run it with `python main.py`.")
    original_lines = set(text.split("\n"))
    for chunk in chunks:
        for line in chunk.split("\n"):
            assert line in original_lines, f"code line was broken: {line!r}"
        assert "```python\n```" not in chunk, "empty code block"


def test_code_indentation_survives_the_cut() -> None:
    body = "\n".join(f"{'    ' * (i % 4)}step({i})" for i in range(200))
    text = f"~~~js title=demo\n{body}\n~~~"
    chunks = split_message(text, 400)
    assert_valid(text, chunks, 400)
    for chunk in chunks[1:]:
        assert chunk.startswith("~~~js title=demo\n")
    code = [line for chunk in chunks for line in chunk.split("\n") if not line.startswith("~~~")]
    assert code == body.split("\n")


def test_prose_outside_code_is_not_fenced() -> None:
    text = _prose(EN_SENTENCES, 30, seed=3) + "\n\n" + _code(20) + "\n\n"
    text += _prose(ES_SENTENCES, 30, seed=4)
    chunks = split_message(text, 1500)
    assert_valid(text, chunks, 1500)
    assert not chunks[0].startswith("```")
    assert not chunks[-1].startswith("```")


def test_code_line_longer_than_the_limit_is_hard_cut_inside_the_fence() -> None:
    text = "```\n" + "z" * 250 + "\n```"
    chunks = split_message(text, 100)
    assert_valid(text, chunks, 100)
    assert all(chunk.startswith("```\n") and chunk.endswith("\n```") for chunk in chunks)
    assert "".join(chunk[4:-4] for chunk in chunks) == "z" * 250


# --- graphemes at hard cuts ------------------------------------------------------------------


@pytest.mark.parametrize(
    "grapheme",
    [
        "e\u0301",  # e + combining acute
        "n\u0303\u0323",  # n + two combining marks
        "👨\u200d👩\u200d👧\u200d👦",  # family: ZWJ sequence
        "👍🏽",  # skin-tone modifier
        "🇪🇸",  # flag: regional-indicator pair
        "1\ufe0f\u20e3",  # keycap
        "❤\ufe0f",  # variation selector
    ],
)
@pytest.mark.parametrize("limit", [DISCORD, TELEGRAM])
def test_hard_cut_never_splits_a_grapheme(grapheme: str, limit: int) -> None:
    for offset in range(1, len(grapheme)):  # every way the limit can fall inside it
        text = "x" * (limit - offset) + grapheme + "y" * 50
        chunks = split_message(text, limit)
        assert chunks == ["x" * (limit - offset), grapheme + "y" * 50], offset


def test_flags_are_cut_between_pairs() -> None:
    text = "🇪🇸" * 1500  # 3000 code points of regional indicators
    chunks = split_message(text, DISCORD)
    assert [len(c) for c in chunks] == [2000, 1000]
    assert "".join(chunks) == text


def test_emoji_and_accents_in_prose_survive() -> None:
    text = " ".join(["Café ☕️ con María 👩\u200d⚕️ en Gasteiz, ¡qué bien!"] * 200)
    chunks = split_message(text, DISCORD)
    assert_valid(text, chunks, DISCORD)
    for chunk in chunks:
        assert unicodedata.category(chunk[0]) not in ("Mn", "Me")
        assert not chunk.endswith("\u200d")


# --- invariants over generated text ----------------------------------------------------------


def _random_document(rng: random.Random) -> str:
    parts: list[str] = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.35:
            parts.append(_prose(EN_SENTENCES + ES_SENTENCES, rng.randint(1, 8), rng.random()))
        elif kind < 0.55:
            # A fence only counts at the start of a line, so keep code on its own lines.
            lang = rng.choice(["python", "", "sql", "rust"])
            parts.append("\n" + _code(rng.randint(1, 30), lang) + "\n")
        elif kind < 0.7:
            alphabet = "ab👍🏽e\u0301 🇪🇸"
            parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 300))))
        elif kind < 0.85:
            parts.append("\n".join(f"{rng.randint(1, 9)}. punto ¿sí?" for _ in range(5)))
        else:
            parts.append("w" * rng.randint(50, 400))
    return rng.choice(["\n\n", "\n", " "]).join(parts)


@pytest.mark.parametrize("limit", [40, 64, 100, 333, DISCORD, TELEGRAM])
def test_invariants_hold_on_generated_documents(limit: int) -> None:
    rng = random.Random(limit)
    for _ in range(150):
        text = _random_document(rng)
        chunks = split_message(text, limit)
        if len(text) <= limit:
            assert chunks == ([text] if text.strip() else [])
        else:
            assert_valid(text, chunks, limit)

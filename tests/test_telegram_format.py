"""Formatting per platform: Telegram gets HTML (escaped, *actions* in italics, headings never
shown as ``##``), split with its tags balanced; Discord gets the Markdown as it is. The fake Bot
API parses every HTML message as strictly as the real one and refuses what it would refuse."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bot.adapters.split import split_html
from bot.adapters.telegram_adapter import LIMIT
from bot.adapters.telegram_format import to_telegram_html
from tests.conftest import FakeClock, running_telegram
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_html import parse_html
from tests.fakes.telegram_objects import ApiError
from tests.test_discord_adapter import running


def visible(markdown: str) -> tuple[str, list[tuple[str, str]]]:
    text, entities = parse_html(to_telegram_html(markdown))
    return text, [(e["type"], text[e["offset"] : e["offset"] + e["length"]]) for e in entities]


def test_actions_in_italics_and_everything_else_escaped() -> None:
    shown, entities = visible("*se ajusta el sombrero* Dime, ¿<quién> & por qué?")
    assert shown == "se ajusta el sombrero Dime, ¿<quién> & por qué?"
    assert entities == [("italic", "se ajusta el sombrero")]


def test_headings_bold_and_code_become_tags_never_literal_marks() -> None:
    shown, entities = visible("## El caso\n**Ojo**: usa `a<b` y\n```py\nx = 2*3*4 & 1\n```")
    assert "##" not in shown and "**" not in shown and "```" not in shown
    assert ("bold", "El caso") in entities and ("bold", "Ojo") in entities
    assert ("code", "a<b") in entities and ("pre", "x = 2*3*4 & 1") in entities


@pytest.mark.parametrize(
    "markdown", ["2*3*4 = 24", "un * suelto", "*a **b* c**", "**", "* lista\n* otra", "a*b*c"]
)
def test_stray_asterisks_stay_as_they_are_and_still_parse(markdown: str) -> None:
    shown, _ = visible(markdown)
    assert shown.count("*") >= markdown.count("*") - 2  # at most one pair became a tag


@pytest.mark.parametrize(
    "html",
    ["<b>open", "<i>a</b>", "<b><i>x</b></i>", "a < b", "fish & chips", "<script>x</script>",
     "&nbsp;", "</i>"],
)  # fmt: skip
def test_the_fake_refuses_html_telegram_refuses(html: str) -> None:
    with pytest.raises(ApiError):
        parse_html(html)


def sample_reply(rng: random.Random) -> str:
    pieces = [
        "*se enciende un pitillo*",
        "Dime & calla.",
        "¿<Quién>?",
        "**Ojo**",
        "`código`",
        "\n\n",
        "\n## Título\n",
        "palabra",
        "👨‍👩‍👧",
        "*mira por la ventana, despacio, sin prisa, mientras llueve*",
    ]
    return " ".join(rng.choice(pieces) for _ in range(rng.randint(5, 120)))


def test_split_html_keeps_every_chunk_balanced_and_loses_no_text() -> None:
    rng = random.Random(14)
    for _ in range(300):
        markdown = sample_reply(rng)
        html = to_telegram_html(markdown)
        limit = rng.randint(40, 400)
        chunks = split_html(html, limit)
        assert all(len(chunk) <= limit for chunk in chunks), (limit, chunks)
        shown = [parse_html(chunk)[0] for chunk in chunks]  # each one parses on its own
        whole = parse_html(html)[0]
        assert "".join("".join(shown).split()) == "".join(whole.split())


def test_split_html_reopens_an_action_cut_in_two() -> None:
    html = to_telegram_html("*" + "mira por la ventana " * 30 + "despacio*")
    chunks = split_html(html, 200)
    assert len(chunks) > 2
    assert all(c.startswith("<i>") and c.endswith("</i>") for c in chunks)


async def test_telegram_reply_in_html_split_with_tags_balanced(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    action = "*" + "se ajusta el sombrero y mira la lluvia " * 150 + "despacio*"
    fake_anthropic.queue(Text(f"## Nota\n{action} ¿Y tú & <yo>?"))
    async with running_telegram(tmp_path, fake_anthropic, clock) as (fake, _app):
        fake.send_private_text(1001, "Hola")
        await fake.wait_until(
            lambda: any("<yo>" in (m["text"] or "") for m in fake.sent_messages(1001))
        )
    sent = fake.sent_messages(1001)
    assert len(sent) >= 2 and all(m["parse_mode"] == "HTML" for m in sent)
    assert all(len(m["params"]["text"]) <= LIMIT for m in sent)
    assert sent[0]["text"].startswith("Nota\nse ajusta")  # no "##", no "*"
    kinds = [e["type"] for m in sent for e in m["message"].get("entities") or []]
    assert kinds.count("italic") == len(sent) and "bold" in kinds
    assert sent[-1]["text"].endswith("¿Y tú & <yo>?")


async def test_discord_gets_the_markdown_as_it_is(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    reply = "*se ajusta el sombrero* **Ojo** & <nada>"
    fake_anthropic.queue(Text(reply))
    async with FakeDiscord() as fake, running(tmp_path, fake, fake_anthropic, clock):
        await fake.dm(4242, "Hola")
        answer = (await fake.wait_for_dms(4242, 1))[0]
    assert answer.content == reply


def test_a_hard_cut_never_splits_an_entity_or_a_tag() -> None:
    html = to_telegram_html("<&>" * 300 + "*" + "x" * 300 + "*")  # no space to cut at
    for limit in (37, 50, 64):
        chunks = split_html(html, limit)
        assert all(len(c) <= limit for c in chunks)
        assert "".join(parse_html(c)[0] for c in chunks) == "<&>" * 300 + "x" * 300

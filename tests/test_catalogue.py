"""One message catalogue (bot/texts.py), in the user's language.

* Both languages carry the same keys with the same placeholders.
* No user-visible sentence is written outside it: an AST scan of the modules that answer users
  finds no wording in what they pass to Answer, Button labels, UserFacingError or a platform's
  send call; memory/'s refusals on the users' path carry a catalogue code.
* The language follows the user (Telegram's language_code, Discord's interaction locale), then
  the character: a scripted session in English against a Spanish character gets no Spanish
  word of the catalogue, and the other way round.
"""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path

import pytest

from bot.texts import TEXTS, pick_language, text
from tests.conftest import FakeClock, running_telegram
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.test_discord_adapter import running

ROOT = Path(__file__).resolve().parents[1]
# The modules whose words reach users of the chat platforms and the terminal chat.
ANSWERING = [
    "bot/commands.py",
    "bot/memoria.py",
    "bot/presence.py",
    "bot/photos.py",
    "bot/terminal.py",
    "bot/greeting.py",
    "bot/canon_commands.py",
    *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "bot/adapters").glob("*.py"))),
]
# memory/ modules on the users' path: their refusals are worded by the catalogue.
REFUSING = ["memory/privacy.py", "memory/engine/companion.py", "memory/engine/bursts.py"]
# `companion memory import` and the reader of its file: an admin's command line, in English.
CLI_ONLY = {"import_"}
TEXT_CALLS = {"Answer", "UserFacingError", "Button"}
SEND_CALLS = {"send_message", "edit_message_text", "reply_text", "send", "print"}
WORDING = re.compile(r"[^\W\d_]{3,}")  # a word of three letters or more
COMMAND_NAME = re.compile(r"/\w+")  # "/press": a command is a name, not wording
# Messages for the operator starting the bot (console, English), not for people chatting.
OPERATOR = {("bot/adapters/discord_adapter.py", "login")}


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_both_languages_have_the_same_keys_and_placeholders() -> None:
    assert set(TEXTS["es"]) == set(TEXTS["en"])
    for key, spanish in TEXTS["es"].items():
        assert placeholders(spanish) == placeholders(TEXTS["en"][key]), key


def literals_outside_calls(node: ast.AST) -> list[str]:
    """String pieces written in ``node`` itself, not inside a nested call (text(lang, "key")
    is the catalogue, a key is no wording)."""
    if isinstance(node, ast.Call):
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return [
        piece for child in ast.iter_child_nodes(node) for piece in literals_outside_calls(child)
    ]


def user_visible_arguments(call: ast.Call) -> list[ast.AST]:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name in TEXT_CALLS:
        keywords = [k.value for k in call.keywords if k.arg in ("message", "text", "label")]
        return [*call.args[:1], *keywords]
    if name in SEND_CALLS:
        keywords = [k.value for k in call.keywords if k.arg in ("content", "text")]
        return [*call.args[:2], *keywords]
    return []


def wording_outside_catalogue(path: str) -> list[str]:
    tree = ast.parse((ROOT / path).read_text(), path)
    operator = {
        call
        for function in ast.walk(tree)
        if isinstance(function, ast.AsyncFunctionDef | ast.FunctionDef)
        and (path, function.name) in OPERATOR
        for call in ast.walk(function)
    }
    found = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and n not in operator):
        for argument in user_visible_arguments(call):
            for piece in literals_outside_calls(argument):
                if WORDING.search(COMMAND_NAME.sub("", piece)):
                    found.append(f"{path}:{call.lineno}: {piece!r}")
    return found


def test_no_user_visible_wording_outside_the_catalogue() -> None:
    found = [line for path in ANSWERING for line in wording_outside_catalogue(path)]
    assert found == []


def test_the_scan_finds_wording_when_there_is_some(tmp_path: Path) -> None:
    source = 'Answer(f"There is no fact #{n}")\nprint(text(lang, "help"))\nButton("Sí", "x")\n'
    tree = ast.parse(source)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    pieces = [
        p for c in calls for a in user_visible_arguments(c) for p in literals_outside_calls(a)
    ]
    assert [p for p in pieces if WORDING.search(p)] == ["There is no fact #"]


def refusals_without_code(path: str) -> list[str]:
    tree = ast.parse((ROOT / path).read_text(), path)
    found = []
    for function in (
        n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef)
    ):
        if function.name in CLI_ONLY:
            continue
        for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
            if getattr(call.func, "id", "") != "UserFacingError":
                continue
            code = next((k.value for k in call.keywords if k.arg == "code"), None)
            if not (
                isinstance(code, ast.Constant) and all(code.value in TEXTS[lang] for lang in TEXTS)
            ):
                found.append(f"{path}:{call.lineno} ({function.name})")
    return found


def test_memory_refusals_carry_a_catalogue_code() -> None:
    assert [line for path in REFUSING for line in refusals_without_code(path)] == []


@pytest.mark.parametrize(
    ("locale", "character", "expected"),
    [("en-US", "es", "en"), ("es-419", "en", "es"), ("fr", "es", "es"), (None, "en", "en")],
)
def test_the_users_language_then_the_characters(
    locale: str | None, character: str, expected: str
) -> None:
    assert pick_language(locale, character) == expected


def words_only_in(language: str) -> set[str]:
    """Words of the catalogue in one language that the other never uses."""

    def words(lang: str) -> set[str]:
        return {w.lower() for value in TEXTS[lang].values() for w in WORDING.findall(value)}

    other = "en" if language == "es" else "es"
    return {w for w in words(language) - words(other) if len(w) >= 4}


SESSION = ["/ayuda", "/memoria", "/memoria historial 99", "/memoria porque", "/memoria nada"]


async def telegram_session(
    tmp_path: Path, llm: FakeAnthropic, clock: FakeClock, language: str, character: str
) -> list[str]:
    """The scripted session on Telegram as a user whose client speaks ``language``."""
    async with running_telegram(tmp_path, llm, clock) as (fake, _app):
        fake.languages[7] = language
        fake.send_command(7, 7, "/personaje", character)
        for count, line in enumerate(SESSION, 2):
            command, _, rest = line.partition(" ")
            fake.send_command(7, 7, command, rest)
            await fake.wait_for_messages(7, count)
        return [str(m["text"]) for m in fake.sent_messages(7)]


@pytest.mark.parametrize(
    ("language", "character"), [("en", "detective_bilbao"), ("es", "lighthouse_keeper")]
)
async def test_a_telegram_session_speaks_the_users_language_only(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock, language: str, character: str
) -> None:
    replies = await telegram_session(tmp_path, fake_anthropic, clock, language, character)
    foreign = words_only_in("es" if language == "en" else "en")
    leaks = {
        word for reply in replies for word in WORDING.findall(reply) if word.lower() in foreign
    }
    assert leaks == set(), replies
    no_fact = text(language, "no_fact", id=99)
    assert no_fact in replies  # memory/'s refusal, worded in the user's language


async def test_discord_answers_in_the_interaction_locale(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with FakeDiscord() as fake, running(tmp_path, fake, fake_anthropic, clock) as h:
        english = await h.slash("memoria", {"numero": 99}, subcommand="historial", locale="en-GB")
        spanish = await h.slash("memoria", {"numero": 99}, subcommand="historial", locale="es-ES")
        assert english.content == text("en", "no_fact", id=99)
        assert spanish.content == text("es", "no_fact", id=99)
        view = await h.slash("memoria", subcommand="ver", locale="en-US")
        assert (view.content or "").startswith(text("en", "mem_none"))

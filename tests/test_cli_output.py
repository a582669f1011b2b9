"""What the admin commands print is meant for people: sentences, not Python reprs; no INFO log
lines on the terminal; the admin's memory screen speaks of the user; bad flags say what to
type; `stats` prices each model at its own rate."""

from __future__ import annotations

import re
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.cli import build_parser
from bot.config import Settings
from bot.evaluation import format_report
from bot.memoria import format_view
from memory.models import Summary, SummaryFields, UsageRecord
from memory.privacy import MemoryView
from memory.usage_stats import Prices, PriceTable, parse_model_prices, totals
from tests.fakes.anthropic_api import FakeAnthropic
from tests.test_cli import chat_as_ana, companion, env_for

REPRS = ("{'", "['", "': ")


def sqlite_env(tmp_path: Path) -> dict[str, str]:
    """A fresh SQLite file, under `make test-postgres` too (whose database is migrated)."""
    env = env_for(tmp_path, None)
    env.pop("DATABASE_URL", None)
    return env


async def test_migrate_says_what_it_did_in_words(tmp_path: Path) -> None:
    env = sqlite_env(tmp_path)
    code, out, err = await companion("migrate", env=env)
    assert code == 0, err
    assert not any(mark in out for mark in REPRS) and ".sql" not in out, out
    assert "applied " in out and "migrations (0001_initial to " in out
    assert " INFO " not in err  # progress lines go to the log file
    code, out, err = await companion("migrate", env=env)
    assert code == 0 and "already up to date" in out, out + err


async def test_admin_memory_screens_speak_of_the_user_once_each(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    code, _, err = await chat_as_ana(env_for(tmp_path, fake_anthropic), "Vivo en Deusto\n")
    assert code == 0, err
    admin = env_for(tmp_path, None)
    code, out, err = await companion(
        "memory", "show", "--platform", "terminal", "--user", "ana", env=admin
    )
    assert code == 0, err
    assert "about you" not in out and " you " not in out  # the admin is not the user
    assert "Usage" not in out and "/memoria" not in out  # the user's commands, not the admin's
    headings = [line for line in out.splitlines() if line.startswith("== ")]
    assert "== detective_bilbao: what it remembers about terminal user ana" in headings
    assert len(headings) == len(set(headings)) >= 2  # every character, once


async def test_memory_import_and_forget_count_in_words(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    code, _, err = await chat_as_ana(env_for(tmp_path, fake_anthropic), "Vivo en Deusto\n")
    assert code == 0, err
    admin = env_for(tmp_path, None)
    export = tmp_path / "ana.json"
    args = ("--platform", "terminal", "--user", "ana", "--character", "detective_bilbao")
    code, _, err = await companion("memory", "export", *args, "--out", str(export), env=admin)
    assert code == 0, err
    code, out, err = await companion(
        "memory", "import", str(export), "--platform", "discord", "--user", "77", env=admin
    )
    assert code == 0, err
    assert out.startswith("imported into detective_bilbao: 1 conversation, 2 turns, "), out
    forget = ("memory", "forget", "--platform", "discord", "--user", "77", "--yes")
    code, out, err = await companion(*forget, env=admin)
    assert code == 0, err
    # One line for the character (and one for the user's own rows), not a count per table.
    (line, user_line) = out.strip().splitlines()
    assert re.fullmatch(r"detective_bilbao: deleted \d+ rows \(-v: by table\)", line), out
    assert user_line.startswith("user 77: no memory left")
    assert not any(mark in out for mark in REPRS), out
    code, out, err = await companion(
        "memory", "import", str(export), "--platform", "discord", "--user", "77", env=admin
    )
    assert code == 0, err
    code, out, err = await companion(*forget, "-v", env=admin)
    assert code == 0, err
    assert "detective_bilbao: deleted " in out and "2 turns" in out, out
    assert not any(mark in out for mark in REPRS), out


async def test_a_misspelt_platform_is_refused_with_the_closest_name(tmp_path: Path) -> None:
    code, out, err = await companion(
        "memory", "show", "--platform", "telegarm", "--user", "1", env=env_for(tmp_path, None)
    )
    assert code == 2 and out == ""
    assert "unknown platform 'telegarm'; did you mean telegram?" in err, err


async def test_db_copy_names_the_flag_that_gave_the_unreachable_address(
    tmp_path: Path,
) -> None:
    env = sqlite_env(tmp_path)
    code, _, err = await companion("migrate", env=env)
    assert code == 0, err
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    target = f"postgresql://companion:pw@127.0.0.1:{port}/companion"
    source = env["DATABASE_PATH"]
    code, _, err = await companion("db", "copy", "--from", source, "--to", target, env=env)
    assert code == 2, err
    [line] = [line for line in err.splitlines() if line.startswith("companion:")]
    assert "check --to and the server" in line and "DATABASE_URL" not in line, line


async def test_db_copy_warns_the_admin_in_a_plain_line(tmp_path: Path) -> None:
    """A warning an admin command shows (here the source's folder others may enter) is one
    line for a person on stderr, not a log record with its time and logger."""
    env = sqlite_env(tmp_path)
    code, _, err = await companion("migrate", env=env)
    assert code == 0, err
    source = Path(env["DATABASE_PATH"])
    source.parent.chmod(0o755)
    target = tmp_path / "copy" / "companion.db"
    code, out, err = await companion(
        "db", "copy", "--from", str(source), "--to", str(target), env=env
    )
    assert code == 0, err
    assert "counts and checksums verified" in out
    warning = f"companion: warning: the database folder {source.parent} can be entered"
    assert warning in err, err
    assert "WARNING" not in err and "memory.store" not in err, err
    assert not re.search(r"^\d{4}-\d\d-\d\d ", err, re.MULTILINE), err
    log = (source.parent / "companion.log").read_text()
    assert " WARNING memory.store.sqlite.files: the database folder" in log  # the file keeps it


def test_help_says_what_characters_does() -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0]  # type: ignore[union-attr]
    [summary] = [a.help for a in commands._choices_actions if a.dest == "characters"]
    actions = commands.choices["characters"]._subparsers._group_actions[0].choices
    for action in actions:  # list, lint, import, export
        assert action in str(summary), (action, summary)


def test_the_user_memory_screen_has_no_heading_over_nothing() -> None:
    empty = Summary(SummaryFields(), frozenset(), 0, datetime(2026, 1, 1, tzinfo=UTC))
    shown = format_view(MemoryView(facts=(), summary=empty, review_mode=False), "Koldo", "en")
    assert shown.splitlines()[0] == "I don't remember anything about you yet."
    assert "What Koldo remembers" not in shown and "conversation" not in shown.lower()


def test_eval_report_is_sentences() -> None:
    report = {
        "character": "detective_bilbao",
        "turns": 4,
        "questions": 1,
        "failed": 1,
        "checkpoints": [
            {
                "turn": 4,
                "asked": 1,
                "failed": [
                    {"question": "¿Dónde vivo?", "expected": ["Deusto"], "found_in": ["nowhere"]}
                ],
            }
        ],
    }
    text = format_report(report)
    assert not any(mark in text for mark in REPRS), text
    assert "“¿Dónde vivo?”: the reply should contain Deusto" in text


def _usage(model: str) -> UsageRecord:
    return UsageRecord(
        kind="reply", model=model, ok=True, input_tokens=1_000_000, output_tokens=1_000_000
    )


def test_stats_prices_each_model_at_its_own_rate() -> None:
    paid = Prices(input_per_mtok=3.0, output_per_mtok=15.0)
    table = PriceTable(paid, parse_model_prices("llama3:8b:0.5:1,claude-haiku:1:5"))
    cost = {
        model: totals([_usage(model)], table)[-1].cost
        for model in (
            "claude-sonnet-5-5",
            "qwen2.5:7b",
            "llama3:8b-instruct",
            "claude-haiku-5-5",
            "",
        )
    }
    assert cost == {
        "claude-sonnet-5-5": 18.0,  # Anthropic's, at the configured price
        "qwen2.5:7b": 0.0,  # a local model, unnamed: free
        "llama3:8b-instruct": 1.5,  # named by prefix in MODEL_PRICES
        "claude-haiku-5-5": 6.0,
        "": 18.0,  # a row that names no model (a failed call): the configured price
    }


def test_model_prices_that_do_not_parse_say_the_format() -> None:
    with pytest.raises(ValueError, match="expected model:INPUT:OUTPUT"):
        Settings(_env_file=None, model_prices="llama3:free")  # type: ignore[call-arg]

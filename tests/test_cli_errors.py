"""Errors that say what to fix: one line on stderr (exit code 2), the full detail in the log
file; as an admin meets them, through the real `companion` process."""

from __future__ import annotations

import asyncio
import errno
import socket
import sqlite3
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from bot.cli import _database_problem
from bot.config import Settings
from bot.config_errors import describe_settings_error, unknown_env_keys
from bot.network_errors import describe_unreachable
from tests.patience import PATIENCE
from tests.test_cli import companion, env_for


def problem_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def closed_port() -> int:
    """A local port nobody listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_bad_setting_names_the_variable_and_what_it_accepts(tmp_path: Path) -> None:
    env = env_for(tmp_path, None, RATE_LIMIT_MESSAGES="abc", LLM_PROVIDER="claude")
    code, _, err = await companion("migrate", env=env)
    assert code == 2
    assert problem_lines(err) == [
        "companion: invalid settings: LLM_PROVIDER=claude: must be one of 'anthropic' or "
        "'openai'; RATE_LIMIT_MESSAGES=abc: must be a whole number"
    ]


def test_settings_errors_in_words() -> None:
    with pytest.raises(ValidationError) as error:
        Settings(  # type: ignore[call-arg]
            _env_file=None, llm_max_retries=11, rate_limit_window_seconds=0, timezone="Mars/Base"
        )
    assert describe_settings_error(error.value) == [
        "LLM_MAX_RETRIES=11: must be at most 10",
        "RATE_LIMIT_WINDOW_SECONDS=0: must be above 0",
        "TIMEZONE=Mars/Base: unknown time zone 'Mars/Base'; use an IANA name such as "
        "Europe/Madrid or UTC",
    ]
    with pytest.raises(ValidationError) as error:
        Settings(_env_file=None, anthropic_api_key=["sk-not-shown"])  # type: ignore[call-arg]
    [line] = describe_settings_error(error.value)
    assert line.startswith("ANTHROPIC_API_KEY:") and "sk-not-shown" not in line


def test_unknown_env_keys_get_the_closest_name(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("RATE_LIMIT_MESAGES=5\nlog_level=DEBUG\nFOO_BAR=1\n# COMMENT=1\n")
    assert unknown_env_keys(env_file) == [
        f"{env_file}: unknown setting RATE_LIMIT_MESAGES is ignored; did you mean "
        "RATE_LIMIT_MESSAGES?",
        f"{env_file}: unknown setting FOO_BAR is ignored; see .env.example for the settings",
    ]
    assert unknown_env_keys(tmp_path / "absent") == []


async def test_env_typos_and_a_model_of_another_provider_are_warned(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("RATE_LIMIT_MESAGES=5\n")  # the process runs in tmp_path
    env = env_for(
        tmp_path,
        None,
        LLM_PROVIDER="openai",
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        LLM_MODEL="claude-sonnet-5-5",
    )
    code, _, err = await companion("migrate", env=env)
    assert code == 0, err
    assert (
        "companion: warning: .env: unknown setting RATE_LIMIT_MESAGES is ignored; did you "
        "mean RATE_LIMIT_MESSAGES?" in err
    )
    assert (
        "companion: warning: LLM_MODEL=claude-sonnet-5-5 is an Anthropic model but "
        "LLM_PROVIDER=openai" in err
    )


def test_model_names_are_checked_against_the_provider() -> None:
    def warnings(**values: str) -> list[str]:
        return Settings(_env_file=None, **values).model_warnings()  # type: ignore[arg-type]

    assert warnings(llm_provider="anthropic", llm_model="claude-test") == []
    assert warnings(llm_provider="openai", llm_model="llama3.1") == []
    [line] = warnings(llm_provider="anthropic", llm_model="llama3.1")
    assert line.startswith("LLM_MODEL=llama3.1 is not an Anthropic model")
    [line] = warnings(llm_provider="openai", llm_model="qwen", llm_summary_model="claude-haiku")
    assert line.startswith("LLM_SUMMARY_MODEL=claude-haiku is an Anthropic model")


@pytest.mark.sqlite_only  # a corrupt SQLite file; PostgreSQL's own case is below
async def test_a_corrupt_or_unreachable_database_is_named(tmp_path: Path) -> None:
    corrupt = tmp_path / "c.db"
    corrupt.write_text("not a database, only text" * 100)
    code, _, err = await companion("migrate", env=env_for(tmp_path, None))
    assert code == 2
    assert problem_lines(err) == [
        f"companion: the database {corrupt} is corrupt or not a SQLite file (file is not a "
        "database); restore it from a backup or point DATABASE_PATH elsewhere"
    ]
    inside_a_file = corrupt / "x.db"
    env = env_for(tmp_path, None, DATABASE_PATH=str(inside_a_file))
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bot", "memory", "show", "--platform", "telegram", "--user", "u"),
        env=env,
        cwd=tmp_path,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err_bytes = await asyncio.wait_for(process.communicate(), PATIENCE)
    assert process.returncode == 2
    [line] = problem_lines(err_bytes.decode())
    assert line.startswith(f"companion: cannot create the database {inside_a_file}:")


def test_a_full_disk_and_an_unwritable_folder_say_what_to_do() -> None:
    path = Path("/srv/companion.db")
    full = _database_problem(sqlite3.OperationalError("database or disk is full"), path)
    assert (
        full == f"the database {path} cannot grow: database or disk is full; free some disk space"
    )
    readonly = _database_problem(sqlite3.OperationalError("unable to open database file"), path)
    assert readonly.startswith(f"cannot write the database {path} (unable to open database file)")


@pytest.mark.parametrize("platform", ["telegram", "discord"])
async def test_an_unreachable_platform_is_one_line_naming_the_host(
    tmp_path: Path, platform: str
) -> None:
    port = closed_port()
    name = platform.upper()
    env = env_for(
        tmp_path,
        None,
        ANTHROPIC_API_KEY="sk-unused",
        **{
            f"{name}_BOT_TOKEN": "123456:ABCDEFGHIJ",
            f"{name}_API_BASE_URL": f"http://127.0.0.1:{port}",
        },
    )
    code, _, err = await companion("run", env=env)
    assert code == 2, err
    lines = [line for line in problem_lines(err) if line.startswith("companion:")]
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"companion: cannot reach {platform} at 127.0.0.1:{port} (")
    assert f"{name}_API_BASE_URL" in lines[0]
    log = (tmp_path / "companion.log").read_text()
    assert "Traceback" in log  # the full detail is kept, in the log file


async def test_an_unreachable_postgresql_is_one_line_without_the_password(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://bot:CANARY-secret-77@127.0.0.1:{port}/companion"
    code, out, err = await companion("migrate", env=env_for(tmp_path, None, DATABASE_URL=url))
    assert code == 2, out
    [line] = problem_lines(err)
    assert line.startswith(f"companion: cannot reach the database postgresql://127.0.0.1:{port}")
    assert "DATABASE_URL" in line and "CANARY" not in err


async def test_version_and_a_closed_pipe(tmp_path: Path) -> None:
    code, out, _ = await companion("--version", env=env_for(tmp_path, None))
    assert code == 0 and out.strip() == "companion 0.1.0"
    env = env_for(tmp_path, None)
    export = tmp_path / "empty.json"
    export.write_text(
        '{"format": "companion-memory", "version": 1, "character_id": "detective_bilbao"}'
    )
    code, _, err = await companion(
        "memory", "import", str(export), "--platform", "terminal", "--user", "ana", env=env
    )
    assert code == 0, err
    # `companion memory show ... | true`: the reader is gone before anything is written.
    shell = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        f"{sys.executable} -m bot memory show --platform terminal --user ana | true",
        env=env,
        cwd=tmp_path,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err_bytes = await asyncio.wait_for(shell.communicate(), PATIENCE)
    assert "BrokenPipeError" not in err_bytes.decode() and "Traceback" not in err_bytes.decode()


async def test_an_unreachable_llm_is_one_log_line_naming_the_host(tmp_path: Path) -> None:
    port = closed_port()
    script = tmp_path / "script.yaml"
    script.write_text(
        "sessions:\n  - messages: ['Hola']\ncheckpoints:\n  - after_turn: 1\n"
        "    questions: [{ask: '¿Sigues?', expect: ['sí']}]\n"
    )
    env = env_for(
        tmp_path, None, ANTHROPIC_API_KEY="sk-unused", ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}"
    )
    code, _, err = await companion(
        "eval", "--character", "detective_bilbao", "--script", str(script), env=env
    )
    assert code == 1, err  # the question failed: the model was never reached
    assert f"[cannot reach 127.0.0.1:{port} (" in err
    assert "Traceback" not in err
    assert "Traceback" in (tmp_path / "companion.log").read_text()


async def test_only_connection_failures_count_as_unreachable() -> None:
    port = closed_port()
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError) as refused:
            await client.get(f"http://127.0.0.1:{port}/v1/messages")
    assert describe_unreachable(refused.value) == (
        f"cannot reach 127.0.0.1:{port} (All connection attempts failed)"
    )
    full_disk = OSError(errno.ENOSPC, "No space left on device")
    assert describe_unreachable(full_disk) is None
    assert describe_unreachable(ValueError("bad")) is None

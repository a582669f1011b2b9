"""The `companion` command as an admin runs it: a real subprocess against the fake API."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from memory.store.errors import available_migrations
from tests.conftest import CHARACTERS
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.patience import PATIENCE
from tests.pg_fixtures import suite_server
from tests.raw_db import raw_database


def cli_database(tmp_path: Path) -> Path | str:
    """The database the `companion` subprocesses of env_for() use."""
    url = os.environ.get("DATABASE_URL")
    return url if suite_server() and url else tmp_path / "c.db"


def env_for(tmp_path: Path, fake: FakeAnthropic | None, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANTHROPIC_", "LLM_", "OPENAI_", "DATABASE_"))
    }
    env.update(
        {
            "DATABASE_PATH": str(tmp_path / "c.db"),
            "CHARACTERS_DIR": str(CHARACTERS),
            "LLM_MAX_RETRIES": "0",
        }
    )
    if fake is not None:
        env.update({"ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.url})
    if suite_server() and os.environ.get("DATABASE_URL"):  # make test-postgres: this test's db
        env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    env.update(extra)
    return env


async def companion(*args: str, env: dict[str, str], stdin: str = "") -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        env=env,
        cwd=tmp_cwd(env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), PATIENCE)
    return process.returncode or 0, out.decode(), err.decode()


async def chat_as_ana(env: dict[str, str], stdin: str) -> tuple[int, str, str]:
    """`companion chat` with Koldo, as the terminal user "ana"."""
    return await companion(
        "chat", "--character", "detective_bilbao", "--user", "ana", env=env, stdin=stdin
    )


def tmp_cwd(env: dict[str, str]) -> str:
    # Run away from the repository so that a developer's .env cannot leak into the test.
    return str(Path(env["DATABASE_PATH"]).parent)


async def test_help_lists_the_commands(tmp_path: Path) -> None:
    code, out, _ = await companion("--help", env=env_for(tmp_path, None))
    assert code == 0
    for command in ("chat", "migrate", "characters"):
        assert command in out


async def test_chat_continues_across_runs(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    env = env_for(tmp_path, fake_anthropic)
    fake_anthropic.queue(Text("Siéntate. ¿Qué te trae?"), Text("Iñaki. Lo apunto."))
    code, out, err = await chat_as_ana(env, "Hola\nMi hermano se llama Iñaki\n")
    assert code == 0, err
    assert "La silla cojea" in out  # the pinned opening is shown to a new user
    assert "Koldo Arrieta: Iñaki. Lo apunto." in out
    code, out, err = await chat_as_ana(env, "¿Cómo se llamaba mi hermano?\n/quit\n")
    assert code == 0, err
    assert "La silla cojea" not in out
    texts = [b["text"] for m in fake_anthropic.bodies()[-1]["messages"] for b in m["content"]]
    assert "Mi hermano se llama Iñaki" in texts and "Iñaki. Lo apunto." in texts
    with raw_database(cli_database(tmp_path)) as raw:
        reasons = raw.execute("SELECT end_reason FROM conversations ORDER BY id").fetchall()
    assert reasons == [("exit",), ("exit",)]


async def test_no_provider_names_the_setting_to_add(tmp_path: Path) -> None:
    code, _, err = await companion(
        "chat", "--character", "detective_bilbao", env=env_for(tmp_path, None)
    )
    assert code == 2
    assert "ANTHROPIC_API_KEY" in err
    code, _, err = await companion(
        "chat",
        "--character",
        "detective_bilbao",
        env=env_for(tmp_path, None, LLM_PROVIDER="openai"),
    )
    assert code == 2 and "OPENAI_BASE_URL" in err


async def test_migrate_and_characters_commands(tmp_path: Path) -> None:
    env = env_for(tmp_path, None)
    latest = available_migrations("sqlite")[-1][0]
    code, out, _ = await companion("migrate", env=env)
    # A test's PostgreSQL database is a copy of a migrated template: nothing left to apply.
    fresh = isinstance(cli_database(tmp_path), Path)
    assert code == 0 and ("(0001_initial to " in out or not fresh), out
    assert f"schema version {latest}" in out
    code, out, _ = await companion("migrate", env=env)
    assert code == 0 and "already up to date" in out
    code, out, _ = await companion("characters", "list", env=env)
    assert "detective_bilbao\tKoldo Arrieta" in out
    code, out, _ = await companion("characters", "lint", env=env)
    assert "2 character(s), 1 warning(s)" in out  # DEFAULT_CHARACTER is unset: who new users get
    pinned = {**env, "DEFAULT_CHARACTER": "detective_bilbao"}
    code, out, _ = await companion("characters", "lint", env=pinned)
    assert code == 0 and "2 character(s), 0 warning(s)" in out


async def test_unknown_character_is_a_clear_error(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    code, _, err = await companion(
        "chat", "--character", "nobody", env=env_for(tmp_path, fake_anthropic)
    )
    assert code == 2
    assert "Unknown character 'nobody'. Valid: detective_bilbao, lighthouse_keeper." in err


async def test_memoria_in_the_terminal(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    env = env_for(tmp_path, fake_anthropic)
    script = (
        "Vivo en Deusto\n/memoria ver\n/memoria exportar\n/memoria olvidar\n"
        "/press mem:forget:detective_bilbao\n/memoria ver\n"
    )
    code, out, err = await chat_as_ana(env, script)
    assert code == 0, err
    assert "Uso: /memoria ver" in out  # the view lists the subcommands
    # In the data folder beside the database (ignored by git), readable by its owner only.
    exported = tmp_path / "exports" / "memoria-detective_bilbao-terminal-ana.json"
    assert f"(guardado en {exported})" in out
    assert json.loads(exported.read_text())["turns"][0]["text"] == "Vivo en Deusto"
    assert exported.stat().st_mode & 0o777 == 0o600
    assert not (Path(tmp_cwd(env)) / "memoria-detective_bilbao.json").exists()
    assert "/press mem:forget:detective_bilbao" in out  # the confirmation button, in text
    assert "Koldo Arrieta te ha olvidado por completo" in out
    assert out.rstrip().split("\n\n")[-2].endswith("No recuerdo nada de ti todavía.")
    with raw_database(cli_database(tmp_path)) as raw:
        assert raw.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == 0

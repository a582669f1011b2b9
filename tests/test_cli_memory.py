"""`companion memory ...` for support and erasure requests, as a real subprocess."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.fakes.anthropic_api import FakeAnthropic
from tests.test_cli import chat_as_ana, companion, env_for


async def test_show_export_import_forget(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    env = env_for(tmp_path, fake_anthropic)
    code, _, err = await chat_as_ana(env, "Vivo en Deusto\n")
    assert code == 0, err
    admin = env_for(tmp_path, None)  # no LLM key needed for these
    code, out, _ = await companion(
        "memory", "show", "--platform", "terminal", "--user", "ana", env=admin
    )
    assert code == 0 and "== detective_bilbao" in out
    export = tmp_path / "ana.json"
    code, _, err = await companion(
        "memory",
        "export",
        "--platform",
        "terminal",
        "--user",
        "ana",
        "--character",
        "detective_bilbao",
        "--out",
        str(export),
        env=admin,
    )
    assert code == 0, err
    data = json.loads(export.read_text())
    assert "Vivo en Deusto" in [t["text"] for t in data["turns"]]
    code, out, _ = await companion(
        "memory", "import", str(export), "--platform", "discord", "--user", "77", env=admin
    )
    assert code == 0 and "'turns': 2" in out
    code, out, _ = await companion(
        "memory", "forget", "--platform", "terminal", "--user", "ana", env=admin, stdin="bea\n"
    )
    assert code == 1 and "nothing deleted" in out
    code, out, _ = await companion(
        "memory", "forget", "--platform", "terminal", "--user", "ana", env=admin, stdin="ana\n"
    )
    assert code == 0 and "detective_bilbao: deleted" in out
    with sqlite3.connect(tmp_path / "c.db") as raw:
        owners = raw.execute(
            "SELECT DISTINCT u.platform FROM turns t JOIN users u ON u.id = t.user_id"
        ).fetchall()
    assert owners == [("discord",)]  # the imported copy stays, ana's turns are gone


async def test_refused_without_the_right_arguments(tmp_path: Path) -> None:
    admin = env_for(tmp_path, None)
    code, _, err = await companion("memory", "forget", "--user", "ana", env=admin)
    assert code == 2 and "--platform" in err
    code, _, err = await companion(
        "memory", "show", "--platform", "telegram", "--user", "nobody", env=admin
    )
    assert code == 2 and "no user nobody on telegram" in err
    code, _, err = await companion(
        "memory", "export", "--platform", "telegram", "--user", "x", env=admin
    )
    assert code == 2

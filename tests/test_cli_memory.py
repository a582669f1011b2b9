"""`companion memory ...` for support and erasure requests, as a real subprocess."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from memory.store import open_store
from tests.fakes.anthropic_api import FakeAnthropic
from tests.raw_db import raw_database
from tests.test_cli import chat_as_ana, cli_database, companion, env_for


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
    assert code == 0 and "2 turns" in out
    code, out, _ = await companion(
        "memory", "forget", "--platform", "terminal", "--user", "ana", env=admin, stdin="bea\n"
    )
    assert code == 1 and "nothing deleted" in out
    code, out, _ = await companion(
        "memory", "forget", "--platform", "terminal", "--user", "ana", env=admin, stdin="ana\n"
    )
    assert code == 0 and "detective_bilbao: deleted" in out
    with raw_database(cli_database(tmp_path)) as raw:
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
    # --character is required by the parser (as the README's synopsis shows), before any
    # database is opened: one export per character.
    assert code == 2 and "the following arguments are required: --character" in err
    code, out, _ = await companion("memory", "export", "--help", env=admin)
    assert code == 0 and "--character CHARACTER" in out and "[--character" not in out


def memory_args(action: str, *extra: str, user: str = "ana") -> list[str]:
    return ["memory", action, *extra, "--platform", "terminal", "--user", user]


async def test_exports_are_private_and_never_overwritten(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    script = "Vivo en Deusto\n/memoria exportar\n"
    code, _, err = await chat_as_ana(env_for(tmp_path, fake_anthropic), script)
    assert code == 0, err
    own = tmp_path / "exports" / "memoria-detective_bilbao-terminal-ana.json"
    assert own.exists()  # the one Ana wrote from the chat, in the same folder
    admin = env_for(tmp_path, None)
    export = [*memory_args("export"), "--character", "detective_bilbao"]
    code, _, err = await companion(*export, env=admin)
    assert code == 0, err
    # By default in data/exports/ beside the database: a folder git ignores; named apart from
    # the chat's export, so that neither refuses nor overwrites the other.
    default = tmp_path / "exports" / "memoria-detective_bilbao-terminal-ana-admin.json"
    assert f"wrote {default}" in err
    assert own.exists() and default != own
    assert default.stat().st_mode & 0o777 == 0o600
    assert "Vivo en Deusto" in default.read_text()
    default.write_text("keep me")
    code, _, err = await companion(*export, env=admin)
    assert code == 2
    assert err.strip() == f"companion: {default} already exists; pass --force to overwrite it"
    assert default.read_text() == "keep me"
    default.chmod(0o644)
    code, _, err = await companion(*export, "--force", env=admin)
    assert code == 0, err
    assert json.loads(default.read_text())["character_id"] == "detective_bilbao"
    assert default.stat().st_mode & 0o777 == 0o600  # an overwritten file is made private too
    code, out, _ = await companion(*export, "--out", "-", env=admin)
    assert code == 0 and json.loads(out)["user"]["id"] == "ana"


async def test_an_export_imported_twice_is_refused(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    code, _, err = await chat_as_ana(env_for(tmp_path, fake_anthropic), "Vivo en Deusto\n")
    assert code == 0, err
    admin = env_for(tmp_path, None)
    export = tmp_path / "ana.json"
    code, _, err = await companion(
        *memory_args("export"), "--character", "detective_bilbao", "--out", str(export), env=admin
    )
    assert code == 0, err
    into_bea = memory_args("import", str(export), user="bea")
    code, out, err = await companion(*into_bea, env=admin)
    assert code == 0 and "2 turns" in out, err
    code, out, err = await companion(*into_bea, env=admin)
    assert code == 2
    assert err.strip() == (
        f"companion: {export}: 2 of its 2 turns are already in the memory of terminal user "
        "bea with detective_bilbao (imported before?); nothing imported"
    )
    # Into ana herself, who still has them: refused as well.
    code, _, err = await companion(*memory_args("import", str(export)), env=admin)
    assert code == 2 and "already in the memory of terminal user ana" in err
    with raw_database(cli_database(tmp_path)) as raw:
        counts = raw.execute(
            "SELECT u.platform_user_id, COUNT(*) FROM turns t JOIN users u ON u.id = t.user_id"
            " GROUP BY u.platform_user_id ORDER BY 1"
        ).fetchall()
    assert counts == [("ana", 2), ("bea", 2)]


async def test_an_export_never_writes_through_a_symbolic_link(tmp_path: Path) -> None:
    store = await open_store(cli_database(tmp_path))  # ana exists; her export has no turns
    try:
        await store.upsert_user("terminal", "ana", "Ana", datetime.now(UTC))
    finally:
        await store.close()
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file")
    link = tmp_path / "export.json"
    link.symlink_to(victim)
    export = [*memory_args("export"), "--character", "detective_bilbao", "--out", str(link)]
    code, _, err = await companion(*export, "--force", env=env_for(tmp_path, None))
    assert code == 2
    assert err.strip() == (
        f"companion: {link} is a symbolic link; refusing to write through it (even with "
        "--force): give --out the path of a real file"
    )
    assert victim.read_text() == "someone else's file" and link.is_symlink()

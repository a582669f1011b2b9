"""compose.yaml stays usable by a new admin (issue 35 item 12; no Docker here, so the file is
read as compose reads it): the bots' /data in named volumes, a POSTGRES_PASSWORD with @ / :
reaching the database whole (checked against a PostgreSQL stand-in that asks for the password
and records it), the password listed in .env.example, and docs/deploy.md saying how to run the
admin commands under compose."""

from __future__ import annotations

import asyncio
import re
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import yaml

from memory.store import open_store
from tests.conftest import REPO

COMPOSE = yaml.safe_load((REPO / "compose.yaml").read_text())
BOTS = ("platform", "worker")
PASSWORD = "p@ss/w:rd#?"


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:?message} and ${VAR:-default}, from `env`."""

    def one(found: re.Match[str]) -> str:
        match = re.fullmatch(r"(\w+)(?::([?-])(.*))?", found.group(1), re.S)
        assert match is not None, found.group(0)
        name, operator, rest = match.groups()
        if env.get(name):
            return env[name]
        if operator == "?":
            raise ValueError(rest)  # compose refuses to start
        return rest or ""

    return re.sub(r"\$\{([^}]+)\}", one, value)


def service_env(name: str, env: dict[str, str]) -> dict[str, str]:
    environment: dict[str, Any] = COMPOSE["services"][name]["environment"]
    return {key: interpolate(str(value), env) for key, value in environment.items()}


def test_the_bots_data_is_in_named_volumes() -> None:
    declared = set(COMPOSE["volumes"])
    for bot in BOTS:
        mounts = [m.split(":") for m in COMPOSE["services"][bot].get("volumes", [])]
        sources = [source for source, target, *_ in mounts if target == "/data"]
        assert len(sources) == 1, f"{bot}: /data is an anonymous volume"
        assert sources[0] in declared, sources


def test_the_password_is_never_inside_the_url() -> None:
    for bot in BOTS:
        env = service_env(bot, {"POSTGRES_PASSWORD": PASSWORD})
        assert PASSWORD not in env["DATABASE_URL"]
        assert env["PGPASSWORD"] == PASSWORD
    assert "${POSTGRES_PASSWORD:?" in COMPOSE["x-companion"]["environment"]["PGPASSWORD"]


@asynccontextmanager
async def password_taker() -> AsyncIterator[tuple[int, list[str]]]:
    """A PostgreSQL stand-in: refuses SSL, asks for a cleartext password, records it, and
    refuses the login (nothing further of the protocol is needed)."""
    heard: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            (length,) = struct.unpack("!i", await reader.readexactly(4))
            body = await reader.readexactly(length - 4)
            if body[:4] == struct.pack("!i", 80877103):  # SSLRequest
                writer.write(b"N")
                continue
            break
        writer.write(b"R" + struct.pack("!ii", 8, 3))  # AuthenticationCleartextPassword
        await writer.drain()
        kind, length = await reader.readexactly(1), struct.unpack("!i", await reader.readexactly(4))
        assert kind == b"p"
        heard.append((await reader.readexactly(length[0] - 4)).rstrip(b"\0").decode())
        fields = b"SFATAL\0C28P01\0Mpassword authentication failed\0\0"
        writer.write(b"E" + struct.pack("!i", len(fields) + 4) + fields)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], heard
    finally:
        server.close()


async def test_a_password_with_at_slash_and_colon_reaches_the_database_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = service_env("worker", {"POSTGRES_PASSWORD": PASSWORD})
    async with password_taker() as (port, heard):
        url = env["DATABASE_URL"].replace("@postgres:5432/", f"@127.0.0.1:{port}/")
        assert url != env["DATABASE_URL"], env["DATABASE_URL"]
        monkeypatch.setenv("PGPASSWORD", env["PGPASSWORD"])
        with pytest.raises(Exception, match="password"):
            await open_store(url)
    assert heard and set(heard) == {PASSWORD}


def test_env_example_lists_the_password_and_deploy_says_how_to_run_commands() -> None:
    example = (REPO / ".env.example").read_text()
    assert re.search(r"^# POSTGRES_PASSWORD=$", example, re.M)
    deploy = (REPO / "docs" / "deploy.md").read_text()
    for command in ("memory show", "memory forget", "memory export", "stats", "inbox dead-letters"):
        assert re.search(rf"^docker compose exec (-T )?\w+ companion {command}\b", deploy, re.M), (
            command
        )

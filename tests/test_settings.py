"""The documentation stays true to the code: every setting in .env.example, every command in
the README, and clear errors for bad values."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from bot.cli import build_parser
from bot.config import COMPOSE_KEYS, Settings, parse_lifetimes
from tests.conftest import REPO


def test_env_example_lists_exactly_the_settings() -> None:
    lines = (REPO / ".env.example").read_text().splitlines()
    # A setting is given (KEY=value) or shown commented out with its default (# KEY=value).
    setting = re.compile(r"^(# )?[A-Z_]+=")
    keys = {line.removeprefix("# ").split("=")[0].lower() for line in lines if setting.match(line)}
    # and the keys only docker compose reads (its PostgreSQL's password)
    assert keys == set(Settings.model_fields) | {key.lower() for key in COMPOSE_KEYS}
    for index, line in enumerate(lines):  # every setting has a comment above it
        if setting.match(line):
            above = [text for text in lines[:index] if text.strip()][-1]
            assert above.startswith("#") or re.match(r"^[A-Z_]+=", above), line


def test_env_example_values_parse() -> None:
    values = {}
    for line in (REPO / ".env.example").read_text().splitlines():
        if re.match(r"^(# )?[A-Z_]+=.", line):
            key, value = line.removeprefix("# ").split("=", 1)
            values[key.lower()] = value
    settings = Settings(_env_file=None, **values)  # type: ignore[call-arg]
    assert settings.window_keep_turns < settings.window_trigger_turns


def test_readme_names_every_cli_command() -> None:
    readme = (REPO / "README.md").read_text()
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in commands:
        assert f"companion {name}" in readme, name
    assert "make test" in readme and "make run" in readme


def test_bad_values_say_what_to_fix() -> None:
    with pytest.raises(ValidationError, match="unknown time zone 'Mars/Base'"):
        Settings(_env_file=None, timezone="Mars/Base")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="entry 'job:soon': expected key:DAYS or key:never"):
        parse_lifetimes("semantic:1,emotional:1,episodic:1,job:soon", 14)
    with pytest.raises(ValueError, match=r"missing \['episodic'\]"):
        parse_lifetimes("semantic:1,emotional:1", 14)
    with pytest.raises(ValueError, match=r"WINDOW_KEEP_TURNS \(40\) must be below"):
        Settings(_env_file=None, window_keep_turns=40, window_trigger_turns=32).engine()  # type: ignore[call-arg]

"""What an admin reads about a bad setting: one line per error naming the setting as written
in .env, and a warning for each key of .env that is no setting (bot/cli.py prints them)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from pydantic import ValidationError

from bot.config import COMPOSE_KEYS, Settings, setting_name


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _accepts(error: dict[str, Any]) -> str:
    """What the setting accepts, in words, for one pydantic error."""
    kind, ctx = error["type"], error.get("ctx") or {}
    phrases = {
        "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "int_type": "must be a whole number",
        "float_parsing": "must be a number",
        "float_type": "must be a number",
        "bool_parsing": "must be true or false",
        "greater_than_equal": f"must be at least {_number(ctx.get('ge'))}",
        "greater_than": f"must be above {_number(ctx.get('gt'))}",
        "less_than_equal": f"must be at most {_number(ctx.get('le'))}",
        "less_than": f"must be below {_number(ctx.get('lt'))}",
        "literal_error": f"must be one of {ctx.get('expected')}",
    }
    if kind in phrases:
        return phrases[kind]
    return str(error["msg"]).removeprefix("Value error, ")


def describe_settings_error(exc: ValidationError) -> list[str]:
    """One line per bad setting: its name as written in .env, the value, what it accepts
    (never the value of a secret, nor pydantic's dump and web link)."""
    lines = []
    for error in exc.errors(include_url=False):
        field = str(error["loc"][0]) if error["loc"] else ""
        name = setting_name(field)
        info = Settings.model_fields.get(field)
        secret = info is not None and "SecretStr" in str(info.annotation)
        value = error.get("input")
        shown = f"={str(value)[:60]}" if isinstance(value, str | int | float) and not secret else ""
        accepts = _accepts(error)
        if accepts.startswith(name):
            lines.append(accepts)
        else:
            lines.append(f"{name}{shown}: {accepts}")
    return lines


def unknown_env_keys(env_file: Path = Path(".env")) -> list[str]:
    """A warning for each key of `.env` that is no setting, with the closest valid name: a
    misspelt key would otherwise be ignored without a word."""
    if not env_file.is_file():
        return []
    valid = [setting_name(field) for field in Settings.model_fields]
    warnings = []
    for key in dotenv_values(env_file):
        if key.upper() in valid or key.upper() in COMPOSE_KEYS:
            continue
        close = difflib.get_close_matches(key.upper(), valid, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else "; see .env.example for the settings"
        warnings.append(f"{env_file}: unknown setting {key} is ignored{hint}")
    return warnings

"""Where a setting comes from: the environment over `.env`, even when the variable is empty
(`LOG_LEVEL= companion ...` means the default); compose's own keys in `.env` are no
misspelling; `companion --version` loads nothing of the bot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import Settings
from bot.config_errors import unknown_env_keys


def test_an_empty_environment_variable_overrides_dot_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("LOG_LEVEL=DEBUG\nLLM_MODEL=claude-from-dotenv\nTIMEZONE=\n")
    monkeypatch.delenv("LLM_MODEL", raising=False)
    monkeypatch.delenv("TIMEZONE", raising=False)
    monkeypatch.setenv("LOG_LEVEL", "")
    settings = Settings(_env_file=env_file)  # type: ignore[call-arg]
    assert settings.log_level == "INFO"  # the default, not .env's DEBUG
    assert settings.llm_model == "claude-from-dotenv"  # what the environment leaves alone
    assert settings.timezone == "UTC"  # an empty line in .env is still the default
    monkeypatch.setenv("LOG_LEVEL", "WARNING")
    assert Settings(_env_file=env_file).log_level == "WARNING"  # type: ignore[call-arg]


def test_compose_keys_in_dot_env_are_not_called_misspelt(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("POSTGRES_PASSWORD=s3cret\nPOSTGRES_PASWORD=typo\n")
    [warning] = unknown_env_keys(env_file)
    assert "POSTGRES_PASWORD" in warning and "POSTGRES_PASSWORD" not in warning.split(";")[0]


# It starts a `companion` process (tests/store_rule.py).
@pytest.mark.usefixtures("database_target")
def test_version_loads_nothing_of_the_bot() -> None:
    probe = (
        "import sys; from bot.cli import main; main(['--version']); "
        "heavy = ('anthropic', 'discord', 'telegram', 'aiohttp', 'pydantic', 'cards', "
        "'prompt_toolkit', 'bot.app', 'memory.store'); "
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    version, loaded = done.stdout.splitlines()
    assert version.startswith("companion ")
    assert loaded == "[]"

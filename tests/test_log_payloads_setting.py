"""The setting itself (issue 35, faults): a real `companion chat` at LOG_LEVEL=DEBUG with
LOG_SDK_PAYLOADS left at its default writes none of the model requests' payload (the user's
words) to the log file; set to true, the same run writes them, so the probe can see them. The
filters themselves, given the flag: tests/test_log_payloads.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.test_cli import chat_as_ana, env_for

WORDS = "zorionakcanary vivo en Deusto"


async def debug_chat(folder: Path, fake: FakeAnthropic, **extra: str) -> str:
    """The log file of one chat message at DEBUG, with `extra` in the environment."""
    fake.queue(Text("Apuntado."))
    env = env_for(folder, fake, LOG_LEVEL="DEBUG")
    env.pop("LOG_SDK_PAYLOADS", None)  # the default, unless `extra` sets it
    env.update(extra)
    code, _, err = await chat_as_ana(env, f"{WORDS}\n")
    assert code == 0, err
    return await asyncio.to_thread((folder / "companion.log").read_text, encoding="utf-8")


async def test_by_default_no_request_reaches_the_log(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    written = await debug_chat(tmp_path, fake_anthropic)
    assert " DEBUG " in written  # the level is really DEBUG
    assert "zorionakcanary" not in written


async def test_asked_for_the_requests_are_written(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    written = await debug_chat(tmp_path, fake_anthropic, LOG_SDK_PAYLOADS="true")
    assert "zorionakcanary" in written

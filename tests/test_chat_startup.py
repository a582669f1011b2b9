"""`companion chat` reaches its prompt importing only what the prompt needs: never the
platforms' libraries (Discord, Telegram), and the model SDK while the prompt waits
(bot/llm DeferredLLM), so a reply still works and a missing key is still refused at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.llm import DeferredLLM
from memory.engine.llm import LLMRequest, TextBlock
from tests.conftest import make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.test_cli import chat_as_ana, env_for

PLATFORM_LIBRARIES = ("discord", "telegram")  # aiohttp: the Anthropic SDK imports it


def imported(err: str) -> set[str]:
    """The top-level modules a run imported, from Python's -X importtime lines on stderr."""
    names = set()
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


async def test_chat_never_imports_the_platforms_and_still_answers(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(Text("Siéntate."))
    env = env_for(tmp_path, fake_anthropic, PYTHONPROFILEIMPORTTIME="1")
    code, out, err = await chat_as_ana(env, "Hola\n")
    assert code == 0, err
    assert "Koldo Arrieta: Siéntate." in out  # the deferred provider answered
    modules = imported(err)
    assert "bot" in modules and "anthropic" in modules  # the lines were read
    assert not modules & set(PLATFORM_LIBRARIES), sorted(modules & set(PLATFORM_LIBRARIES))


async def test_chat_without_a_key_is_refused_before_the_greeting(tmp_path: Path) -> None:
    code, out, err = await chat_as_ana(env_for(tmp_path, None), "Hola\n")
    assert code == 2
    assert "Koldo Arrieta:" not in out
    assert "ANTHROPIC_API_KEY" in err


async def test_a_reply_cancelled_while_the_sdk_loads_leaves_the_next_one_working(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    """Ctrl-C during the first reply, while the provider is still being built, cancels that
    reply only: the build goes on and the next reply gets an answer."""
    fake_anthropic.queue(Text("Aquí sigo."))
    llm = DeferredLLM(make_settings(tmp_path, fake_anthropic))
    request = LLMRequest("reply", (TextBlock("s"),), ())
    first = asyncio.create_task(llm.complete(request))
    await asyncio.sleep(0)  # the reply waits for the build
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    try:
        answer = await llm.complete(request)
    finally:
        await llm.close()
    assert answer.text == "Aquí sigo."

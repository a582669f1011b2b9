"""LOG_LEVEL=DEBUG does not write the model requests to the log (issue 28, A5): the real
anthropic client against the fake Messages API, logging set up as `companion run` does. The
SDK's payload logging is on only with LOG_SDK_PAYLOADS, and an off-record call is never
written, even then."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.answers import Caller
from bot.app import App
from bot.command_line import run_line
from bot.config import Settings
from bot.logging_setup import MODEL_SDKS, NOISY, PLATFORM_SDKS, configure_logging
from tests.fakes.anthropic_api import FakeAnthropic, Text

ANA = Caller("telegram", "u1", "Ana", "dm", "dm-u1")
ON_RECORD = "Lekeitio3318pangolin"
OFF_RECORD = "Mundaka6604quokka"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; put it back for the other tests."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogRecordFactory())
    names = (*MODEL_SDKS, *PLATFORM_SDKS, *NOISY)
    levels = {name: logging.getLogger(name).level for name in names}
    yield
    for handler in root.handlers:
        if handler not in saved[0]:
            handler.close()
    root.handlers[:], level, factory = saved
    root.setLevel(level)
    logging.setLogRecordFactory(factory)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)


async def say(app: App, line: str) -> str:
    answer = await run_line(app.commands, ANA, line)
    if answer is None:
        answer = await app.commands.chat(ANA, line)
    return answer.text


async def talk(app: App, fake: FakeAnthropic) -> None:
    fake.queue(Text("Apuntado."), Text("Entre nosotros."))
    assert await say(app, f"Me llamo Ana, {ON_RECORD}") == "Apuntado."
    await say(app, "/incognito")
    assert await say(app, f"Un secreto: {OFF_RECORD}") == "Entre nosotros."
    await say(app, "/incognito off")


class Seen(logging.Handler):
    """A handler of somebody else's (an operator's, a test's): none of our filters on it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.parametrize(
    ("payloads", "sdk_says_debug"),
    [(False, False), (False, True), (True, False)],
    ids=["default", "ANTHROPIC_LOG=debug", "LOG_SDK_PAYLOADS"],
)
async def test_debug_logs_no_request_unless_asked_and_never_an_off_record_one(
    app: App,
    settings: Settings,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    restore_logging: None,
    payloads: bool,
    sdk_says_debug: bool,
) -> None:
    log_file = tmp_path / "companion.log"
    configure_logging("DEBUG", settings.secrets(), log_file, to_stderr=False, sdk_payloads=payloads)
    if sdk_says_debug:  # what the SDK does to its own logger when imported with ANTHROPIC_LOG
        logging.getLogger("anthropic").setLevel(logging.DEBUG)
    seen = Seen()
    logging.getLogger().addHandler(seen)
    await talk(app, fake_anthropic)
    # The level is really DEBUG: a debug line of the bot's own is written.
    logging.getLogger("memory.engine").debug("debug level probe")
    for handler in logging.getLogger().handlers:
        handler.flush()
    written = log_file.read_text(encoding="utf-8")
    assert "debug level probe" in written
    assert OFF_RECORD not in written
    # The on-record request is written only when asked for (by the SDK's own logger).
    assert (ON_RECORD in written) is payloads
    if not payloads and not sdk_says_debug:  # not even made: no handler at all sees it
        assert not [line for line in seen.lines if ON_RECORD in line]
    if payloads:
        assert "LOG_SDK_PAYLOADS is on" in written
        assert all(
            line.split(" ")[3].startswith("anthropic")
            for line in written.splitlines()
            if ON_RECORD in line
        )

"""The terminal chat as a person uses it: prompt_toolkit's real line editing fed through its pipe
input, and the real `companion chat` process on a pseudo-terminal for Ctrl-C and the logs."""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from bot.app import App
from bot.terminal import ChatPlaces, PromptReader, StreamReader, run_chat
from tests.fakes.anthropic_api import Delay, FakeAnthropic, Text
from tests.patience import PATIENCE
from tests.raw_db import raw_database
from tests.test_cli import cli_database, env_for
from tests.test_faults_db import fill_disk, random_words

LEFT, UP, CTRL_C, CTRL_D = "\x1b[D", "\x1b[A", "\x03", "\x04"


def user_turns(database: Path | str) -> list[str]:
    with raw_database(database) as raw:
        rows = raw.execute("SELECT text FROM turns WHERE role = 'user' ORDER BY id").fetchall()
    return [text for (text,) in rows]


async def chat_with_keys(app: App, *typed: str) -> str:
    """Type into a real prompt_toolkit prompt, one line at a time (each once the previous one
    was answered, as a person would); the chat's output."""
    out = io.StringIO()
    places = ChatPlaces.beside(app.settings.database_path)
    with create_pipe_input() as pipe:

        async def person() -> None:
            for keys in typed:
                pipe.send_text(keys)
                await asyncio.sleep(0.5)

        typing = asyncio.create_task(person())
        reader = PromptReader(places.history, pipe, DummyOutput())
        await asyncio.wait_for(
            run_chat(
                app.companion,
                app.commands,
                "detective_bilbao",
                "ana",
                stdout=out,
                places=places,
                reader=reader,
            ),
            timeout=PATIENCE,
        )
        await typing
    return out.getvalue()


async def test_arrow_keys_edit_the_line_and_up_recalls_it(
    app: App, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.queue(Text("Anotado."), Text("Ya me lo has dicho."))
    out = await chat_with_keys(app, f"Vivo en Deusto{LEFT * 6}cerca de \r", f"{UP}\r", CTRL_D)
    assert user_turns(app.settings.database_target) == ["Vivo en cerca de Deusto"] * 2
    assert "Koldo Arrieta: Ya me lo has dicho." in out
    history = (tmp_path / "chat_history").read_text()
    assert "+Vivo en cerca de Deusto" in history  # kept for the next run, in the data folder
    assert (tmp_path / "chat_history").stat().st_mode & 0o777 == 0o600
    with raw_database(app.settings) as raw:
        reasons = raw.execute("SELECT end_reason FROM conversations").fetchall()
    assert reasons == [("exit",)]  # Ctrl-D left cleanly and ended the conversation


async def test_an_unknown_slash_command_is_refused_not_sent_as_chat(
    app: App, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    out = await chat_with_keys(app, "/nonsense hola\r", "/ayuda\r", CTRL_C)
    assert "No conozco /nonsense. Comandos: /personaje" in out
    assert "/memoria" in out  # /ayuda answered
    assert fake_anthropic.bodies() == []  # nothing reached the LLM
    assert user_turns(app.settings.database_target) == []


async def test_ctrl_c_at_the_prompt_leaves_at_once(app: App, tmp_path: Path) -> None:
    started = time.monotonic()
    out = await chat_with_keys(app, f"half a line{CTRL_C}")
    assert time.monotonic() - started < 10
    assert "Koldo Arrieta" in out
    assert user_turns(app.settings.database_target) == []  # the half line was not sent


@pytest.mark.sqlite_only  # fills the SQLite file's disk
async def test_a_full_disk_is_one_line_and_the_chat_goes_on(
    app: App, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.queue(Text("Siéntate."))
    out = io.StringIO()
    lines = f"Hola\n{random_words(1)}\n/quit\n"

    class FillsAfterFirst(StreamReader):
        count = 0

        async def read(self) -> str | None:
            self.count += 1
            if self.count == 2:
                await fill_disk(app)
            return await super().read()

    places = ChatPlaces.beside(app.settings.database_path, tmp_path / "companion.log")
    await run_chat(
        app.companion,
        app.commands,
        "detective_bilbao",
        "ana",
        stdout=out,
        places=places,
        reader=FillsAfterFirst(io.StringIO(lines)),
    )
    text = out.getvalue()
    notices = [line for line in text.splitlines() if line.startswith("!")]
    assert notices == [
        f"! the database {app.settings.database_path} failed: database or disk is full; "
        f"details in {tmp_path / 'companion.log'}"
    ]
    assert "Traceback" not in text
    assert user_turns(app.settings.database_target) == ["Hola"]


# ---- the real process on a pseudo-terminal ---------------------------------------------------


class Terminal:
    """`companion chat` on a pty, as a person's terminal runs it."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        args = [sys.executable, "-m", "bot", "chat", "--character", "detective_bilbao"]
        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes `companion chat`, with the pty as its terminal
            os.chdir(cwd)
            os.execve(sys.executable, [*args, "--user", "ana"], env)
        self.pid, self.fd, self.screen = pid, fd, ""

    def _read(self, timeout: float) -> str:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return ""
        try:
            return os.read(self.fd, 65536).decode(errors="replace")
        except OSError:  # the child closed the terminal
            return ""

    async def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + PATIENCE
        while text not in self.screen:
            assert time.monotonic() < deadline, f"{text!r} never appeared in:\n{self.screen}"
            self.screen += await asyncio.to_thread(self._read, 0.2)
        return self.screen

    async def notice(self, opening: str) -> str:
        """The first parenthesised notice that begins with `opening`, whole, once printed."""
        deadline = time.monotonic() + PATIENCE
        while (start := self.screen.find(opening)) < 0 or ")" not in self.screen[start:]:
            assert time.monotonic() < deadline, f"{opening!r} never appeared in:\n{self.screen}"
            self.screen += await asyncio.to_thread(self._read, 0.2)
        return self.screen[start : self.screen.index(")", start) + 1]

    async def wait_for_prompt(self, after: str) -> None:
        """Until a prompt is drawn after the text `after`: keys typed before it would meet the
        terminal's own line discipline (where Ctrl-D is end-of-file), not prompt_toolkit."""
        deadline = time.monotonic() + PATIENCE
        while "> " not in self.screen[self.screen.rfind(after) :]:
            assert time.monotonic() < deadline, f"no new prompt in:\n{self.screen}"
            self.screen += await asyncio.to_thread(self._read, 0.2)
        await asyncio.sleep(0.2)

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    async def exit_code(self) -> int:
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            self.screen += await asyncio.to_thread(self._read, 0.2)
            pid, status = await asyncio.to_thread(os.waitpid, self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError(f"still running:\n{self.screen}")


async def wait_for_requests(fake: FakeAnthropic, count: int) -> None:
    for _ in range(300):
        if len(fake.bodies()) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the LLM was never called")


async def test_ctrl_c_cancels_a_reply_and_logs_stay_out_of_the_chat(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(Delay(8, Text("Demasiado tarde.")), Text("Aquí sigo."))
    env = env_for(tmp_path, fake_anthropic, LOG_LEVEL="DEBUG", TERM="dumb")
    terminal = Terminal(env, tmp_path)
    await terminal.wait_for_prompt(after="¿Qué te trae?")
    terminal.type("Hola\r")
    await wait_for_requests(fake_anthropic, 1)
    started = time.monotonic()
    terminal.type(CTRL_C)
    # The user's turn was stored before the model was called: the notice says it was kept,
    # in the session's language (Koldo speaks Spanish).
    notice = await terminal.notice("(respuesta cancelada")
    assert notice == "(respuesta cancelada; tu mensaje se guardó y la próxima respuesta lo verá)"
    assert time.monotonic() - started < 5  # at once, not after the slow reply
    terminal.type(f"aquí{LEFT * 4}Sigo \r")  # edited with the arrow keys on a real terminal
    screen = await terminal.wait_for("Koldo Arrieta: Aquí sigo.")
    await terminal.wait_for_prompt(after="Aquí sigo.")
    terminal.type(CTRL_D)
    assert await terminal.exit_code() == 0
    assert "Demasiado tarde." not in terminal.screen
    assert " DEBUG " not in screen and " INFO " not in screen and "Traceback" not in screen
    log = (tmp_path / "companion.log").read_text()
    assert " INFO " in log or " DEBUG " in log  # the logs went to the data folder's file
    assert user_turns(cli_database(tmp_path)) == ["Hola", "Sigo aquí"]
    last_request = json.dumps(fake_anthropic.bodies()[-1]["messages"], ensure_ascii=False)
    assert "Hola" in last_request  # kept, as the notice said: the next reply saw it

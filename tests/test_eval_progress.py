"""`companion eval`'s progress bar never runs into the log lines, and is drawn only on a
terminal."""

from __future__ import annotations

import io
import logging

from bot.evaluation import CLEAR_LINE, ProgressBar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_line_clears_the_bar_first_and_the_bar_comes_back_below() -> None:
    screen = Terminal()
    handler = logging.StreamHandler(screen)
    root = logging.getLogger()
    root.addHandler(handler)
    bar = ProgressBar(4, screen, width=4)
    try:
        with bar.over_logs():
            bar.draw(1)
            logging.getLogger("companion.test").warning("summary rejected")
            bar.draw(2)
    finally:
        root.removeHandler(handler)
    assert screen.getvalue() == (
        f"\r{CLEAR_LINE}[#---] 1/4 turns"
        f"\r{CLEAR_LINE}summary rejected\n"
        f"\r{CLEAR_LINE}[##--] 2/4 turns"
        f"\r{CLEAR_LINE}"  # gone at the end, so the report starts on a clean line
    )
    assert bar not in handler.filters  # the handlers are left as they were


def test_no_bar_on_a_pipe_or_file() -> None:
    piped = io.StringIO()
    bar = ProgressBar(3, piped)
    with bar.over_logs():
        for done in range(1, 4):
            bar.draw(done)
    assert piped.getvalue() == ""

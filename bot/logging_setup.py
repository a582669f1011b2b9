"""Logging to stderr and a file, with every configured secret replaced before a line is written.

A record logged with `extra=FILE_ONLY` goes to the file alone: the full detail behind an error
that was already shown to the admin as one line. The terminal chat logs to the file alone, so
that no log line lands inside the conversation.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bot.network_errors import describe_unreachable
from memory.integrity.redaction import Redactor

FILE_ONLY = {"file_only": True}
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RedactSecrets(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self._redact = Redactor(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._redact:
            return True
        message = record.getMessage()
        text = self._redact(message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redact(record.exc_text)
        if text != message:
            record.msg, record.args = text, None
        return True


def _redact_at_creation(redact: RedactSecrets) -> None:
    """Redact every record as it is made, so that no handler can see a secret: a filter on our
    handler alone runs only when that handler's turn comes, after any handler before it or on
    a library's own logger (or a test's capture) has already had the raw record."""
    current = logging.getLogRecordFactory()
    make = getattr(current, "redacting_base", current)  # reconfiguring replaces, never stacks

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        # A malformed call (bad %-args) is left for the handler to report, as usual.
        with contextlib.suppress(Exception):
            redact.filter(record)
        return record

    factory.redacting_base = make  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


class ShortNetworkErrors(logging.Formatter):
    """On stderr, an error caused by a host that cannot be reached is one line naming the host,
    not a hundred lines of DNS and socket traceback; the log file keeps the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        unreachable = describe_unreachable(record.exc_info[1]) if record.exc_info else None
        if unreachable is None or record.exc_info is None:
            return super().format(record)
        short = logging.makeLogRecord(record.__dict__)
        short.msg, short.args = f"{record.getMessage()} [{unreachable}]", None
        short.exc_info, short.exc_text = None, None
        return super().format(short)


def _not_file_only(record: logging.LogRecord) -> bool:
    return not getattr(record, "file_only", False)


def _file_handler(path: Path) -> logging.Handler | None:
    """Appends to `path` (made 0600: log lines can quote what users wrote); None when the
    folder cannot be written, so that a read-only data folder still lets commands run."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # the data folder, private
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        return logging.FileHandler(path, encoding="utf-8")
    except OSError:
        return None


def configure_logging(
    level: str,
    secrets: Iterable[str],
    log_file: Path | None = None,
    to_stderr: bool = True,
) -> Path | None:
    """Route the logs; returns the log file in use (None when there is none)."""
    redact = RedactSecrets(secrets)
    _redact_at_creation(redact)
    handlers: list[logging.Handler] = []
    file_handler = _file_handler(log_file) if log_file is not None else None
    if file_handler is not None:
        handlers.append(file_handler)
    if to_stderr or file_handler is None:
        stderr = logging.StreamHandler()
        stderr.addFilter(_not_file_only)
        stderr.setFormatter(ShortNetworkErrors(FORMAT))
        handlers.append(stderr)
    if file_handler is not None:
        file_handler.setFormatter(logging.Formatter(FORMAT))
    for handler in handlers:
        handler.addFilter(redact)  # also for records made without the factory (makeLogRecord)
    root = logging.getLogger()
    root.handlers[:] = handlers
    root.setLevel(level.upper())
    # httpx logs every request URL at INFO, and Telegram's URLs carry the bot token.
    for noisy in ("httpx", "httpx2", "httpcore", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return log_file if file_handler is not None else None

"""Logging to stderr with every configured secret replaced before a line is written."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from memory.redaction import Redactor


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


def configure_logging(level: str, secrets: Iterable[str]) -> None:
    redact = RedactSecrets(secrets)
    _redact_at_creation(redact)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(redact)  # also for records made without the factory (makeLogRecord)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request URL at INFO, and Telegram's URLs carry the bot token.
    for noisy in ("httpx", "httpx2", "httpcore", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

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
from memory.engine.off_record import in_off_record_call
from memory.integrity.redaction import Redactor

FILE_ONLY = {"file_only": True}
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The SDKs that log whole payloads at DEBUG. A model request holds the profile, the summary and
# the window; LOG_SDK_PAYLOADS=true lets these through, never for an off-record call.
MODEL_SDKS = ("anthropic", "openai")
# A platform SDK logs every update it receives (getUpdates, gateway events) before anyone can
# know the message is off the record: these stay at INFO whatever the settings say.
PLATFORM_SDKS = ("telegram", "discord.http", "discord.gateway", "discord.webhook", "discord.state")
# httpx logs every request URL at INFO, and Telegram's URLs carry the bot token.
NOISY = ("httpx", "httpx2", "httpcore", "httpcore2", "apscheduler")


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


class QuietSdks(logging.Filter):
    """On every handler: the SDKs' payload records are dropped (below INFO; the model SDKs'
    pass with `model_payloads`, except those made during an off-record call). A filter and not
    only logger levels: an SDK may set its own level when imported (ANTHROPIC_LOG=debug)."""

    def __init__(self, model_payloads: bool) -> None:
        super().__init__()
        self._model_payloads = model_payloads

    def filter(self, record: logging.LogRecord) -> bool:
        if _under(record.name, MODEL_SDKS):
            if getattr(record, "off_record", False):
                return record.levelno >= logging.WARNING
            return self._model_payloads or record.levelno >= logging.INFO
        if _under(record.name, PLATFORM_SDKS):
            return record.levelno >= logging.INFO
        return True


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
        # Made in the context of the call that logs it: an off-record model call says so here.
        record.off_record = in_off_record_call()
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


class PlainLines(ShortNetworkErrors):
    """An admin command's warning on stderr as a line for a person ("companion: warning:
    ..."), without the time and logger name the log file keeps."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return f"companion: {record.levelname.lower()}: {record.message}"


def _not_file_only(record: logging.LogRecord) -> bool:
    return not getattr(record, "file_only", False)


def _file_handler(path: Path) -> logging.Handler | None:
    """Appends to `path` (made 0600: log lines can quote what users wrote); None when the
    folder cannot be written, so that a read-only data folder still lets commands run."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # the data folder, private
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.fchmod(descriptor, 0o600)  # a log an older version made was 0644
        finally:
            os.close(descriptor)
        return logging.FileHandler(path, encoding="utf-8")
    except OSError:
        return None


def configure_logging(
    level: str,
    secrets: Iterable[str],
    log_file: Path | None = None,
    to_stderr: bool = True,
    stderr_level: int = logging.NOTSET,
    sdk_payloads: bool = False,
) -> Path | None:
    """Route the logs; returns the log file in use (None when there is none). `stderr_level`:
    the least a record needs to reach stderr too (the admin commands show warnings there, and
    keep their INFO lines for the file). The SDKs' payload logging stays off unless
    `sdk_payloads` (LOG_SDK_PAYLOADS) asks for the model SDKs' (never an off-record call's,
    never a platform's)."""
    redact = RedactSecrets(secrets)
    _redact_at_creation(redact)
    handlers: list[logging.Handler] = []
    file_handler = _file_handler(log_file) if log_file is not None else None
    if file_handler is not None:
        handlers.append(file_handler)
    if to_stderr or file_handler is None:
        stderr = logging.StreamHandler()
        stderr.addFilter(_not_file_only)
        # Only warnings reach stderr (an admin command's): plain lines; everything: the log's.
        plain = file_handler is not None and stderr_level >= logging.WARNING
        stderr.setFormatter(PlainLines(FORMAT) if plain else ShortNetworkErrors(FORMAT))
        stderr.setLevel(stderr_level if file_handler is not None else logging.NOTSET)
        handlers.append(stderr)
    if file_handler is not None:
        file_handler.setFormatter(logging.Formatter(FORMAT))
    quiet = QuietSdks(sdk_payloads)
    for handler in handlers:
        handler.addFilter(redact)  # also for records made without the factory (makeLogRecord)
        handler.addFilter(quiet)
    root = logging.getLogger()
    root.handlers[:] = handlers
    root.setLevel(level.upper())
    # Levels too, so that an SDK does not even build the payload's text to drop it.
    at_least_info = max(root.level, logging.INFO)
    for name in PLATFORM_SDKS:
        logging.getLogger(name).setLevel(at_least_info)
    for name in MODEL_SDKS:
        logging.getLogger(name).setLevel(logging.NOTSET if sdk_payloads else at_least_info)
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if sdk_payloads:
        logging.getLogger("companion").warning(
            "LOG_SDK_PAYLOADS is on: at LOG_LEVEL=DEBUG every model request is written to the "
            "log in full (profiles, summaries, what users said on the record); turn it off "
            "when done"
        )
    return log_file if file_handler is not None else None

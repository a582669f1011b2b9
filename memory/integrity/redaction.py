"""One rule for hiding secrets in text, shared by the log (bot/logging_setup.py) and by what is
stored (LLM error bodies in llm_usage): `memory/` cannot import `bot/`, so it lives here."""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "[redacted]"
# Shorter values would match ordinary words; no real key or token is this short.
MIN_SECRET_CHARS = 6


class Redactor:
    def __init__(self, secrets: Iterable[str]) -> None:
        unique = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        self._secrets = sorted(unique, key=len, reverse=True)  # a longer one may hold another

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __call__(self, text: str) -> str:
        """`text` with every secret replaced, and a secret cut off at its end (a body shortened
        before it got here) too."""
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        for secret in self._secrets:
            for cut in range(len(secret) - 1, MIN_SECRET_CHARS - 1, -1):
                if text.endswith(secret[:cut]):
                    return text[:-cut] + REDACTED
        return text

"""Telling "the host cannot be reached" apart from other failures, and naming the host.

Each HTTP stack wraps the socket's error its own way (httpx, aiohttp, anthropic, PTB); the
chain of causes always ends in an OSError or one of a few known connection errors.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator

# Connection failures by class name: the libraries' classes need not be imported to match.
_NETWORK_ERRORS = {
    "ConnectError",
    "ConnectTimeout",
    "NetworkError",
    "TimedOut",
    "APIConnectionError",
    "APITimeoutError",
    "ClientConnectorError",
}


# Socket errors that mean the host is not there (a full disk is an OSError too, and not one).
_SOCKET_ERRORS = (ConnectionError, TimeoutError, socket.gaierror, socket.herror)
_UNREACHABLE_ERRNOS = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ECONNREFUSED, errno.ETIMEDOUT}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def network_cause(exc: BaseException) -> BaseException | None:
    """The first connection failure in the exception's chain, or None."""
    for link in _chain(exc):
        names = {cls.__name__ for cls in type(link).__mro__}
        unreachable = isinstance(link, OSError) and link.errno in _UNREACHABLE_ERRNOS
        if isinstance(link, _SOCKET_ERRORS) or unreachable or names & _NETWORK_ERRORS:
            return link
    return None


def host_of(exc: BaseException) -> str | None:
    """host:port that the failed connection was for, when any link of the chain says."""
    for link in _chain(exc):
        request = getattr(link, "request", None)
        url = getattr(request, "url", None) if request is not None else None
        host = getattr(url, "host", None)
        if host:
            port = getattr(url, "port", None)
            return f"{host}:{port}" if port else str(host)
        host = getattr(link, "host", None)
        if isinstance(host, str) and host:
            port = getattr(link, "port", None)
            return f"{host}:{port}" if port else host
    return None


def describe_unreachable(exc: BaseException) -> str | None:
    """'cannot reach HOST (reason)' when `exc` is a connection failure, else None."""
    cause = network_cause(exc)
    if cause is None:
        return None
    host = host_of(exc)
    reason = str(cause) or type(cause).__name__
    return f"cannot reach {host} ({reason})" if host else f"cannot connect ({reason})"

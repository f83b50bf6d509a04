"""Connection limits of ``sandbox serve``, enforced in uvicorn's HTTP protocol before a byte of a request is parsed.

Auth and the body timeout (:mod:`~agentrl_sandbox.guard`) start once a request's headers have arrived; a client that
opens connections and never finishes its headers would otherwise hold one open file each, for ever, until the process's
file limit is reached and logged-in callers' connections fail. So, per connection:

* its request's headers must arrive within ``header_timeout_s`` of the connection (and of the previous answer on a
  kept-alive connection), else the server closes it (``header_timeout`` in ``/metrics``' refusals);
* a new connection beyond ``max_connections_per_ip`` from one address, or ``max_connections`` in all, is reset at once
  (``connection_cap``);
* ``max_connections`` stays below the process's open-file limit (:func:`connection_limit`), so the server always has
  files left for the pool and for answering.
"""

from __future__ import annotations

import asyncio
import collections
import resource
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from agentrl_sandbox.guard import ServerLimits
from agentrl_sandbox.server_metrics import ServerMetrics

FD_RESERVE = 256  # open files kept for the server itself: the pool's sockets and pipes, logs, the listening socket


def connection_limit(requested: int | None, reserve: int = FD_RESERVE) -> int:
    """The total connection cap: ``requested``, or the open-file limit less ``reserve``. The soft limit is raised to
    the hard one first; ValueError when ``requested`` would not leave ``reserve`` files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # an infinite hard limit some kernels refuse as a soft one
            pass
    room = soft - reserve
    if room < 1:
        raise ValueError(f"the open-file limit ({soft}, ulimit -n) leaves no room for connections; raise it")
    if requested is None:
        return room
    if requested > room:
        raise ValueError(
            f"--max-connections {requested} is not below the open-file limit {soft} (ulimit -n) less {reserve} "
            f"kept for the server: give at most {room} or raise ulimit -n"
        )
    return requested


class _Open:
    """Open connections by client address (all on the server's loop)."""

    def __init__(self) -> None:
        self.by_ip: collections.Counter[str] = collections.Counter()
        self.total = 0


def guarded_protocol(limits: ServerLimits, max_connections: int, metrics: ServerMetrics) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class (``uvicorn.run(http=...)``) with the header timeout and connection caps."""
    opened = _Open()
    base: Any = AutoHTTPProtocol

    class GuardedHTTPProtocol(base):
        _client_ip: str | None = None
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            peer = transport.get_extra_info("peername")
            ip = str(peer[0]) if peer else ""
            if opened.total >= max_connections or opened.by_ip[ip] >= limits.max_connections_per_ip:
                metrics.reject("connection_cap")
                transport.abort()  # connection_lost follows; nothing of the request protocol was set up
                return
            self._client_ip = ip
            opened.by_ip[ip] += 1
            opened.total += 1
            super().connection_made(transport)
            self._arm_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._client_ip is None:  # refused in connection_made
                return
            opened.by_ip[self._client_ip] -= 1
            if opened.by_ip[self._client_ip] <= 0:
                del opened.by_ip[self._client_ip]
            opened.total -= 1
            self._client_ip = None
            if self._header_timer is not None:
                self._header_timer.cancel()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_header_timer()  # a kept-alive connection: the next request's headers

        def _arm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._header_timer = self.loop.call_later(limits.header_timeout_s, self._headers_due)

        def _headers_due(self) -> None:
            self._header_timer = None
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                return  # a request's headers arrived: it is being answered
            if not self.transport.is_closing():
                metrics.reject("header_timeout")
                self.transport.close()

    return GuardedHTTPProtocol

"""Resource bounds for client connections, the same on both transports.

No client, however it behaves, can make the daemon run out of memory or
descriptors, or stall other clients. Rules:

1. Connections: at most `Limits.max_connections` at once (Unix socket and
   WebSocket together), and never more than the descriptor limit minus
   `HEADROOM` (SQLite, the log, git and the accept loop keep theirs). At start-up
   the soft descriptor limit is raised to the hard one. A client over the cap is
   answered with one clear error and closed; before refusing, the connection idle
   the longest (nothing in flight, no subscription, no unfinished request) is
   closed to make room, so an idle crowd never locks out a new `health` call.
2. Buffered bytes: the bytes of unfinished requests and of requests not yet
   answered count against one budget for all connections together
   (`max_buffered_bytes`); each connection may hold `FREE_BYTES` without drawing
   on it. A connection that would overdraw it gets an error and is closed.
3. In flight: at most `max_requests_in_flight` requests of one connection run at
   once; beyond that the daemon stops reading from it (the kernel's buffers fill
   and the client waits), so pipelining cannot pile up tasks or replies.
4. Time: a request that has started arriving must be complete within
   `request_timeout` (slowloris); a connection with nothing in flight and no
   subscription is closed after `idle_timeout`; a reply or notification the
   client does not read within `send_timeout` closes the connection.

All figures come from ``.thrum/config.json`` (`thrum.config`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import math
import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable

import trio

log = logging.getLogger(__name__)

HEADROOM = 256  # descriptors kept for everything that is not a client connection
FREE_BYTES = 64 * 1024  # bytes a connection may buffer without drawing on the shared budget
MIN_CONNECTIONS = 8


class BudgetExceeded(Exception):
    """The shared buffer budget cannot cover this connection's request."""


@dataclass(frozen=True)
class Limits:
    max_connections: int = 1000
    max_in_flight: int = 32
    max_buffered_bytes: int = 256 * 1024 * 1024
    idle_timeout: float = 600.0
    request_timeout: float = 30.0
    send_timeout: float = 30.0
    max_batch: int = 100

    @classmethod
    def from_config(cls, values: dict[str, Any], nofile: int | None = None) -> "Limits":
        """The configured limits, with the connection cap fitted under the descriptor limit."""
        configured = int(values.get("max_connections") or cls.max_connections)
        soft = nofile if nofile is not None else resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return cls(
            max_connections=connection_cap(configured, soft),
            max_in_flight=int(values.get("max_requests_in_flight") or cls.max_in_flight),
            max_buffered_bytes=int(values.get("max_buffered_bytes") or cls.max_buffered_bytes),
            idle_timeout=float(values.get("idle_timeout") or cls.idle_timeout),
            request_timeout=float(values.get("request_timeout") or cls.request_timeout),
            send_timeout=float(values.get("send_timeout") or cls.send_timeout),
            max_batch=int(values.get("max_batch") or cls.max_batch),
        )


def connection_cap(configured: int, nofile_soft: int) -> int:
    """How many client connections fit: the configured cap, under the descriptor limit minus headroom."""
    if nofile_soft == resource.RLIM_INFINITY or nofile_soft <= 0:
        return configured
    room = nofile_soft - HEADROOM if nofile_soft > 2 * HEADROOM else nofile_soft // 2
    return max(MIN_CONNECTIONS, min(configured, room))


def raise_descriptor_limit() -> int:
    """Raise the soft descriptor limit to the hard one; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.info("cannot raise the descriptor limit from %d to %d: %s", soft, hard, exc)
    return soft


# ---------------------------------------------------------------------------- memory back to the system

_M_MMAP_THRESHOLD = -3  # glibc mallopt parameters
_M_ARENA_MAX = -8
MMAP_THRESHOLD = 256 * 1024
# glibc gives each new thread that allocates an arena of its own, up to 8 per core, and an
# arena keeps what was freed in it for that arena alone. The daemon's threads come and go
# (trio's thread cache: the readers, the sync, the fold), so over the storage benchmark's
# syncs 13-16 arenas each held their own free space: 8-20 MiB more RssAnon than two arenas
# shared by all threads, for no measurable CPU (docs/design/decisions.md, "The daemon's
# memory by owner"). A user's own MALLOC_ARENA_MAX (or glibc tunable) wins.
MALLOC_ARENAS = 2
TRIM_AFTER = 1024 * 1024  # a connection that held this much gives memory back when it closes
_libc = None


def tune_allocator() -> bool:
    """Have glibc map large buffers on their own pages, so freeing them returns the memory,
    and share `MALLOC_ARENAS` arenas between all threads.

    glibc raises its mmap threshold each time a mapped block is freed (up to 32
    MiB): after one abusive 30 MB line, every later buffer below that comes from
    the heap, and a fragmented heap never shrinks. A fixed threshold keeps big
    request buffers out of the heap. Call before threads start allocating (arenas
    already made stay). Returns False where this is not glibc.
    """
    global _libc
    try:
        name = ctypes.util.find_library("c")
        libc = ctypes.CDLL(name) if name else None
        if libc is None or not hasattr(libc, "mallopt") or not hasattr(libc, "malloc_trim"):
            return False
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        if "MALLOC_ARENA_MAX" not in os.environ and "arena_max" not in os.environ.get("GLIBC_TUNABLES", ""):
            libc.mallopt(_M_ARENA_MAX, MALLOC_ARENAS)
        _libc = libc
        return True
    except OSError:
        return False


def give_back_memory() -> None:
    """Return free heap pages to the system (after a large connection closed)."""
    if _libc is not None:
        _libc.malloc_trim(0)


class ByteBudget:
    """Bytes shared by every connection's unfinished and unanswered requests."""

    def __init__(self, total: int):
        self.total = total
        self.used = 0

    def take(self, n: int) -> bool:
        if self.used + n > self.total:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used = max(0, self.used - n)


class Guard:
    """One connection's share of the limits: buffered bytes, requests in flight, deadlines.

    The transport calls `received` for bytes of an unfinished request, `started`
    and `finished` around each complete request, and waits for input until
    `deadline` (in `wait_scope`, which is moved as the state changes), then asks
    `expired` why. `close` (from the registry, on eviction or a send timeout)
    cancels `scope`, the connection's whole nursery.
    """

    def __init__(self, registry: "Registry", transport: str):
        self.registry = registry
        self.limits = registry.limits
        self.transport = transport
        self.in_flight = trio.CapacityLimiter(self.limits.max_in_flight)
        self.partial = 0  # bytes of the request still arriving
        self.partial_since: float | None = None
        self.held = 0  # bytes of requests taken but not yet answered
        self.peak = 0  # most bytes held at once (a big one gives memory back on close)
        self.reserved = 0  # drawn from the shared budget
        self.last_active = trio.current_time()
        self.scope: trio.CancelScope | None = None  # the whole connection (closing it)
        self.wait_scope: trio.CancelScope | None = None  # the current wait for input (its deadline)
        self.close_reason: str | None = None
        self.conn: object = None  # the transport's Connection, once it has one
        # transports that count bytes below the message layer (WebSocket control frames)
        # say here whether a message is really half-received when its clock runs out
        self.partial_probe: Callable[[], bool] | None = None
        self.released = False

    # ------------------------------------------------------------------ bytes
    def received(self, partial: int) -> None:
        """The unfinished request now holds ``partial`` bytes.

        Raises:
            BudgetExceeded: the shared budget cannot hold them.
        """
        now = trio.current_time()
        self.last_active = now
        if partial and self.partial_since is None:
            self.partial_since = now
            self._update_deadline()
        elif not partial and self.partial_since is not None:
            self.partial_since = None
            self._update_deadline()
        self.partial = partial
        self._rebalance()

    def _rebalance(self) -> None:
        total = self.partial + self.held
        if total > self.peak:
            self.peak = total
        want = max(0, total - FREE_BYTES)
        if want > self.reserved:
            if not self.registry.budget.take(want - self.reserved):
                raise BudgetExceeded(
                    f"the daemon is out of request buffer space ({self.registry.budget.used // 1048576} MiB "
                    f"held by unfinished requests; max_buffered_bytes in .thrum/config.json); retry shortly"
                )
        elif want < self.reserved:
            self.registry.budget.give(self.reserved - want)
        self.reserved = want

    def started(self, size: int, remaining: int | None = None) -> None:
        """A complete request of ``size`` bytes moved from the unfinished buffer to a handler.

        ``remaining``: bytes still buffered after it, when the transport knows
        better than ``partial - size``. What follows is a new request: its clock
        starts now.
        """
        self.held += size
        self.partial = max(0, self.partial - size) if remaining is None else remaining
        self.partial_since = trio.current_time() if self.partial else None
        try:
            self._rebalance()  # never grows: the bytes only changed hands
        except BudgetExceeded:
            pass
        self._update_deadline()

    def finished(self, size: int) -> None:
        self.held = max(0, self.held - size)
        self.last_active = trio.current_time()
        try:
            self._rebalance()
        except BudgetExceeded:  # shrinking never overdraws
            pass
        self._update_deadline()

    # ------------------------------------------------------------------ time
    def busy(self, served: set[int] | None = None) -> bool:
        """Something is going on: a request in flight or arriving, or a subscription to serve.

        ``served``: ids of the connections with a subscription, when the caller has them.
        """
        if self.in_flight.borrowed_tokens or self.partial:
            return True
        return id(self.conn) in (served if served is not None else self.registry.served())

    def deadline(self) -> float:
        if self.partial_since is not None:
            return self.partial_since + self.limits.request_timeout
        if self.in_flight.borrowed_tokens:
            return math.inf
        return self.last_active + self.limits.idle_timeout

    def _update_deadline(self) -> None:
        if self.wait_scope is not None:
            self.wait_scope.deadline = self.deadline()

    # ------------------------------------------------------------------ the transport's side
    def belongs_to(self, conn: object, *, partial_probe: Callable[[], bool] | None = None) -> None:
        """The transport's `Connection` (a subscribed one is never idle); ``partial_probe``:
        whether a message is really half-received when its clock runs out (a transport that
        counts bytes below its message layer, such as WebSocket control frames)."""
        self.conn = conn
        self.partial_probe = partial_probe

    def close_with(self, scope: trio.CancelScope) -> None:
        """The cancel scope of the whole connection: `close` cancels it."""
        self.scope = scope

    @contextmanager
    def waiting(self) -> Iterator[trio.CancelScope]:
        """One wait for input, until `deadline` (moved as the state changes); when it is
        cancelled (``cancelled_caught``), `expired` says whether the connection must close."""
        with trio.CancelScope(deadline=self.deadline()) as scope:
            self.wait_scope = scope
            try:
                yield scope
            finally:
                self.wait_scope = None

    def closing(self, reason: str) -> None:
        """The transport closes the connection itself, for ``reason`` (logged, told to the client)."""
        self.close_reason = reason

    def expired(self) -> str | None:
        """Why the connection should close now that its deadline passed (None: it has not)."""
        now = trio.current_time()
        if self.partial_since is not None and now >= self.partial_since + self.limits.request_timeout:
            if self.partial_probe is None or self.partial_probe():
                return f"request not completed within {self.limits.request_timeout:g}s"
            self.started(0, remaining=0)  # only control frames arrived: nothing is pending
        if not self.busy() and now >= self.last_active + self.limits.idle_timeout:
            return f"idle for {self.limits.idle_timeout:g}s"
        if self.busy():
            self.last_active = now  # a subscriber waiting for events is not idle
        return None

    def idle_for(self, served: set[int] | None = None) -> float | None:
        return None if self.busy(served) else trio.current_time() - self.last_active

    # ------------------------------------------------------------------ closing
    def close(self, reason: str) -> None:
        """Close the connection from outside its own task (eviction, stuck sends)."""
        if self.close_reason is None:
            self.close_reason = reason
        if self.scope is not None:
            self.scope.cancel()

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        self.registry.budget.give(self.reserved)
        if self.peak >= TRIM_AFTER:
            self.registry.trim()
        self.reserved = 0
        self.registry.guards.discard(self)


class Registry:
    """Every open client connection, the cap and the shared byte budget."""

    def __init__(self, limits: Limits, served: Callable[[], set[int]] = set):
        """``served``: ids of the connections with a subscription (the hub's): they are never idle."""
        self.limits = limits
        self.budget = ByteBudget(limits.max_buffered_bytes)
        self.guards: set[Guard] = set()
        self.refused = 0
        self.evicted = 0
        self.served = served
        self._last_refusal_log = 0.0
        self._last_trim = 0.0

    def admit(self, transport: str) -> Guard | None:
        """A guard for a new connection, or None when the cap is reached and nobody is idle."""
        if len(self.guards) >= self.limits.max_connections and not self._evict_idlest():
            self.refused += 1
            now = time.monotonic()
            if now - self._last_refusal_log > 10:
                self._last_refusal_log = now
                log.warning(
                    "connection cap reached (%d open); refusing new clients (%d refused so far)",
                    len(self.guards),
                    self.refused,
                )
            return None
        guard = Guard(self, transport)
        self.guards.add(guard)
        return guard

    def _evict_idlest(self) -> bool:
        idlest, longest = None, -1.0
        served = self.served()
        for g in self.guards:
            if g.close_reason is not None:
                continue
            idle = g.idle_for(served)
            if idle is not None and idle > longest:
                idlest, longest = g, idle
        if idlest is None:
            return False
        self.evicted += 1
        idlest.close(f"closed after {longest:.0f}s idle to make room for a new client")
        idlest.release()  # its slot is free now; the task closes the socket as it unwinds
        return True

    def trim(self) -> None:
        """Give freed buffer memory back to the system, at most once a second."""
        now = time.monotonic()
        if now - self._last_trim >= 1.0:
            self._last_trim = now
            give_back_memory()

    def refusal(self) -> str:
        return (
            f"too many connections: the daemon serves at most {self.limits.max_connections} at once "
            f"(max_connections in .thrum/config.json) and none is idle; close some clients and retry"
        )

    def status(self) -> dict[str, Any]:
        return {
            "open": len(self.guards),
            "max": self.limits.max_connections,
            "refused": self.refused,
            "evicted": self.evicted,
            "buffered_bytes": self.budget.used,
            "max_buffered_bytes": self.budget.total,
        }

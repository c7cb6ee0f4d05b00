"""One client connection, whatever the transport.

Replies go out in the order they are ready; a send the client does not take
within ``send_timeout`` closes the connection (`on_stuck`), so a client that
never reads cannot pin replies in memory. Notifications go through the
connection's own bounded outbox: a slow client only ever delays itself. When the
outbox is full the oldest notification is dropped, and the client is told how
many it lost (``notification.dropped``) before the next one it receives. Every
notification carries ``params.seq``, a per-connection sequence number, so a
client can also see gaps itself.
"""

from __future__ import annotations

import errno
import itertools
import math
import logging
from collections import deque
from typing import Any, Awaitable, Callable

import trio

from .. import jsonrpc

log = logging.getLogger(__name__)

_ids = itertools.count(1)


class Connection:
    def __init__(
        self,
        transport: str,
        send_bytes: Callable[[bytes], Awaitable[None]],
        *,
        queue_size: int = 100,
        framing_newline: bool = True,
        send_timeout: float = math.inf,
        on_stuck: Callable[[str], None] | None = None,
        peer_uid: int | None = None,
        observer: bool = False,
        send_now: Callable[[bytes], int] | None = None,
    ):
        """``send_now``: writes what the transport takes at once, without waiting, and says
        how much (a Unix socket's descriptor): a message that fits the socket's buffer then
        goes out without the scheduler's rounds, ~20 µs of CPU less per reply."""
        self.id = f"{transport}-{next(_ids)}"
        # a watcher, not an agent (the Web UI's page): its calls mark nobody as seen
        self.observer = observer
        self.transport = transport
        self.peer_uid = peer_uid  # the Unix socket peer's user id, by the kernel's word (thrum.daemon.peer)
        self._send_bytes = send_bytes
        self._send_now = send_now
        self._newline = framing_newline
        self._send_lock = trio.Lock()
        self.outbox: deque[dict[str, Any]] = deque()
        self.queue_size = max(1, queue_size)
        self._wakeup = trio.Event()
        self._room = trio.Event()
        self.seq = 0
        self.dropped_pending = 0
        self.dropped_total = 0
        self.closed = False
        self.subscriptions: dict[int, object] = {}
        self.session_id: str | None = None
        self.agent: str | None = None
        self.send_timeout = send_timeout
        self._on_stuck = on_stuck

    async def send(self, obj: Any) -> None:
        """Send one message; encoded only once it is its turn (waiting replies stay objects).

        Raises:
            trio.BrokenResourceError: the client did not take it within ``send_timeout``
                (the connection is being closed).
        """
        try:
            if self._send_now is not None and not self.closed:
                try:
                    self._send_lock.acquire_nowait()  # nothing else on the wire: try at once
                except trio.WouldBlock:
                    pass
                else:
                    try:
                        data = self._encode(obj)
                        sent = self._write_now(data)
                        if sent < len(data):
                            await self._send_waiting(data[sent:])
                    finally:
                        self._send_lock.release()
                    return
            async with self._send_lock:
                if self.closed:
                    raise trio.ClosedResourceError("connection closed")
                await self._send_waiting(self._encode(obj))
        finally:
            self._room.set()

    def _encode(self, obj: Any) -> bytes:
        return jsonrpc.encode_line(obj) if self._newline else jsonrpc.encode(obj)

    def _write_now(self, data: bytes) -> int:
        assert self._send_now is not None
        try:
            return self._send_now(data)
        except BlockingIOError:
            return 0
        except OSError as exc:  # the peer went away (EPIPE, ECONNRESET), or the socket was closed
            raise trio.BrokenResourceError(f"connection lost: {exc}") from exc

    async def _send_waiting(self, data: bytes) -> None:
        """Send through the transport, waiting for the client at most ``send_timeout``."""
        with trio.move_on_after(self.send_timeout) as waited:
            await self._send_bytes(data)
        if waited.cancelled_caught:
            reason = f"client did not read within {self.send_timeout:g}s"
            self.close()
            if self._on_stuck is not None:
                self._on_stuck(reason)
            raise trio.BrokenResourceError(reason)

    # ---------------------------------------------------------------- notifications
    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Queue a notification without ever blocking the caller."""
        if self.closed:
            return
        self.seq += 1
        payload = dict(params)
        payload["seq"] = self.seq
        if len(self.outbox) >= self.queue_size:
            self.outbox.popleft()
            self.dropped_pending += 1
            self.dropped_total += 1
        self.outbox.append(jsonrpc.notification(method, payload))
        self._wakeup.set()

    def count_dropped(self, n: int) -> None:
        """Notifications lost before they reached the outbox (a subscription's held
        events overflowing during a slow replay): announced with the outbox's own drops,
        and the sequence numbers skip them so the gap shows."""
        self.seq += n
        self.dropped_pending += n
        self.dropped_total += n
        self._wakeup.set()

    async def run_outbox(self) -> None:
        """Deliver queued notifications until the connection closes."""
        while not self.closed:
            if not self.outbox and self.dropped_pending:  # lost with nothing queued after it: say so now
                lost, self.dropped_pending = self.dropped_pending, 0
                await self.send(
                    jsonrpc.notification(
                        "notification.dropped",
                        {"dropped": lost, "total_dropped": self.dropped_total, "next_seq": self.seq + 1},
                    )
                )
                continue
            if not self.outbox:
                self._wakeup = trio.Event()
                if self.outbox:
                    continue
                await self._wakeup.wait()
                continue
            # Take the next item before announcing drops: more may be dropped while the
            # notice is on the wire, and its next_seq must stay true.
            await trio.lowlevel.checkpoint()  # a send may not yield (`send_now`): a long outbox never holds the loop
            item = self.outbox.popleft()
            if self.dropped_pending:
                lost, self.dropped_pending = self.dropped_pending, 0
                await self.send(
                    jsonrpc.notification(
                        "notification.dropped",
                        {"dropped": lost, "total_dropped": self.dropped_total, "next_seq": item["params"]["seq"]},
                    )
                )
            await self.send(item)

    async def wait_for_room(self) -> None:
        """Return once the outbox is at most half full (paces subscription replays).

        Several replays may wait at once: they share one event, replaced only once it has
        fired. (Each waiter making its own left all but the last waiting until the next
        drop notice: a resuming client heard nothing for over a minute in the soak.)"""
        while not self.closed and len(self.outbox) >= max(1, self.queue_size // 2):
            if self._room.is_set():
                self._room = trio.Event()
            await self._room.wait()

    def close(self) -> None:
        self.closed = True
        self._wakeup.set()
        self._room.set()


def is_disconnect(exc: BaseException, extra: tuple[type[BaseException], ...] = ()) -> bool:
    """True when ``exc`` (or every exception of a group) only says the peer went away."""
    if isinstance(exc, (trio.BrokenResourceError, trio.ClosedResourceError, *extra)):
        return True
    if isinstance(exc, OSError) and exc.errno in (errno.EPIPE, errno.ECONNRESET):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(is_disconnect(e, extra) for e in exc.exceptions)
    return False

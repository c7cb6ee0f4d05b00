"""Async JSON-RPC 2.0 client for the daemon's Unix socket, with notifications.

The async counterpart of `thrum.client`, for long-running front ends (the MCP
server, a web UI) that keep one connection open, issue requests concurrently and
receive the daemon's push notifications (subscriptions, docs/realtime.md). It is
built on anyio, so it runs under asyncio or trio.

Rules:

1. One connection carries any number of requests at once: each has its own id
   and waits for its own answer, so a long ``message.wait`` holds nothing up.
2. A line with a ``method`` and no ``id`` is a notification: it goes to the
   ``on_notification(method, params)`` callback, in arrival order, from the
   reader task. The callback must not block (queue the work, set an event).
3. Errors are those of `thrum.client`: an ``error`` response becomes the typed
   `thrum.errors` exception; no socket or a refused connection is `Unavailable`
   with a message that says what to do; a call without an answer in time is
   `Timeout`.
4. When the connection ends, every pending call fails with `Unavailable` and
   `AsyncClient.closed` is set. Nothing reconnects behind the caller's back:
   `reconnecting` is the loop that does (with the caller's set-up, such as
   subscribing again, run on every new connection).
5. Starting the daemon when needed reuses `thrum.lifecycle.connect` in a worker
   thread (the same path, messages and ``THRUM_NO_AUTOSTART`` rule as the CLI).

Example::

    async with open_client(paths, on_notification=print) as client:
        await client.call("subscribe.create", {"filter_type": "mention", "mention": "alice"})
        await client.closed.wait()
"""

from __future__ import annotations

import logging
import math
import os
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable

import anyio
import orjson
from anyio.streams.buffered import BufferedByteReceiveStream

from .client import DEFAULT_TIMEOUT, with_idempotency_key
from .errors import ThrumError, Timeout, Unavailable, from_rpc

if TYPE_CHECKING:
    from .paths import ThrumPaths

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024 * 1024  # larger than any answer the daemon sends (its own request limit is 32 MiB)

NotificationHandler = Callable[[str, dict[str, Any]], None]


def _not_running(path: str, why: str) -> Unavailable:
    """The same words as `thrum.client` uses for a daemon that is not there."""
    return Unavailable(f"thrum daemon is not running ({why} {path}); start it with `thrum daemon start`")


class AsyncClient:
    """One open connection. Made by `open_client`, which runs its reader task."""

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        *,
        on_notification: NotificationHandler | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        label: str = "thrum daemon",
    ):
        self._stream = stream
        self._on_notification = on_notification
        self.timeout = timeout
        self.label = label
        self._pending: dict[int, _Slot] = {}
        self._next_id = 0
        self._send_lock = anyio.Lock()
        self.closed = anyio.Event()
        self.close_reason = ""

    # ``timeout`` bounds the daemon's answer, as in `thrum.client.Client.call` (same signature on purpose)
    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Any:
        """Send one request and return its ``result``.

        ``timeout`` (seconds) overrides the client's for this call (long polls);
        ``math.inf`` waits as long as the connection lives.

        Raises:
            ThrumError: the typed error of an error response.
            Unavailable: the connection is closed or closes before the answer.
            Timeout: no answer in time.
        """
        if self.closed.is_set():
            raise Unavailable(
                f"the connection to the {self.label} is closed ({self.close_reason}); check `thrum daemon status`"
            )
        params = with_idempotency_key(method, params)  # a retry of a send or edit never writes twice
        self._next_id += 1
        req_id = self._next_id
        slot = _Slot()
        self._pending[req_id] = slot
        data = orjson.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}) + b"\n"
        limit = self.timeout if timeout is None else timeout
        try:
            # Shielded: a line cut in half by a cancellation would corrupt the framing.
            with anyio.CancelScope(shield=True):
                async with self._send_lock:
                    await self._stream.send(data)
            with anyio.fail_after(None if limit is None or limit == math.inf else limit):
                await slot.done.wait()
        except TimeoutError:
            raise Timeout(f"{self.label} did not answer {method} within {limit:g}s") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self._lost("send failed")
            raise Unavailable(
                f"lost the connection to the {self.label} during {method}; check `thrum daemon status`"
            ) from None
        finally:
            self._pending.pop(req_id, None)
        if slot.error is not None:
            raise slot.error
        msg = slot.message
        if "error" in msg and msg["error"] is not None:
            raise from_rpc(msg["error"])
        if "result" not in msg:
            raise ThrumError(f"{self.label} answered {method} with neither result nor error")
        return msg["result"]

    async def aclose(self) -> None:
        await self._lost("closed by the client")

    # ------------------------------------------------------------------ internals

    async def _read_loop(self) -> None:
        reader = BufferedByteReceiveStream(self._stream)
        reason = "the daemon closed it"
        try:
            while True:
                line = await reader.receive_until(b"\n", MAX_LINE)
                if line.strip():
                    self._dispatch(line)
        except anyio.DelimiterNotFound:
            reason = f"an answer longer than {MAX_LINE} bytes"
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            with anyio.CancelScope(shield=True):
                await self._lost(reason)

    def _dispatch(self, line: bytes) -> None:
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            log.warning("%s sent a malformed line: %r", self.label, line[:80])
            return
        if not isinstance(msg, dict):
            return
        if "id" not in msg and isinstance(msg.get("method"), str):
            if self._on_notification is not None:
                params = msg.get("params")
                try:
                    self._on_notification(msg["method"], params if isinstance(params, dict) else {})
                except Exception:
                    log.exception("notification handler failed on %s", msg["method"])
            return
        msg_id = msg.get("id")
        slot = self._pending.get(msg_id) if isinstance(msg_id, int) else None
        if slot is not None and not slot.done.is_set():
            slot.message = msg
            slot.done.set()

    async def _lost(self, reason: str) -> None:
        if self.closed.is_set():
            return
        self.close_reason = reason
        self.closed.set()
        error = Unavailable(f"the {self.label} closed the connection ({reason}); check `thrum daemon status`")
        for slot in self._pending.values():
            if not slot.done.is_set():
                slot.error = error
                slot.done.set()
        try:
            await self._stream.aclose()
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass


class _Slot:
    __slots__ = ("done", "message", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.message: dict[str, Any] = {}
        self.error: Exception | None = None


async def _connect_stream(socket_path: str) -> anyio.abc.ByteStream:
    try:
        return await anyio.connect_unix(socket_path)
    except FileNotFoundError:
        raise _not_running(socket_path, "no socket at") from None
    except ConnectionRefusedError:
        raise _not_running(socket_path, "nothing listening on") from None
    except PermissionError:
        raise Unavailable(
            f"permission denied on the thrum socket {socket_path}; the daemon belongs to another user"
        ) from None
    except OSError as exc:
        raise Unavailable(f"cannot connect to the thrum daemon at {socket_path}: {exc.strerror or exc}") from None


async def ensure_daemon(paths: ThrumPaths, *, quiet: bool = True) -> None:
    """Start the daemon unless one answers (in a worker thread; see `thrum.lifecycle.connect`).

    Raises:
        Unavailable: autostart is off, thrum is not initialised, or the daemon did not come up.
    """
    from . import lifecycle

    def run() -> None:
        lifecycle.connect(paths, autostart=True, quiet=quiet).close()

    await anyio.to_thread.run_sync(run)


@asynccontextmanager
async def open_client(
    paths: ThrumPaths | None = None,
    *,
    socket_path: str | os.PathLike[str] | None = None,
    on_notification: NotificationHandler | None = None,
    autostart: bool = False,
    quiet: bool = True,
    timeout: float | None = DEFAULT_TIMEOUT,  # noqa: ASYNC109 (each call's default limit)
) -> AsyncIterator[AsyncClient]:
    """A connected `AsyncClient` whose reader runs until the block ends (then the connection closes).

    ``autostart``: start the daemon first when it is not running (needs ``paths``).

    Raises:
        Unavailable: the daemon cannot be reached (or started).
    """
    if socket_path is None:
        if paths is None:
            raise TypeError("open_client needs paths or socket_path")
        socket_path = paths.socket
    path = os.fspath(socket_path)
    try:
        stream = await _connect_stream(path)
    except Unavailable:
        if not autostart or paths is None:
            raise
        await ensure_daemon(paths, quiet=quiet)
        stream = await _connect_stream(path)
    client = AsyncClient(stream, on_notification=on_notification, timeout=timeout)
    error: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(client._read_loop)
        try:
            yield client
        except Exception as exc:  # re-raised below as itself, not wrapped in the task group's ExceptionGroup
            error = exc
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()
            tg.cancel_scope.cancel()
    if error is not None:
        raise error


async def reconnecting(
    paths: ThrumPaths,
    session: Callable[[AsyncClient], Awaitable[None]],
    *,
    on_notification: NotificationHandler | None = None,
    kick: Callable[[], anyio.Event] | None = None,
    min_delay: float = 0.05,
    max_delay: float = 1.0,
    on_disconnect: Callable[[str], None] | None = None,
) -> None:
    """Keep a connection to the daemon for ever: connect, run ``session(client)``, repeat.

    ``session`` does the per-connection set-up (subscribe, heartbeat, ...) and
    returns when it wants a new connection; the connection is closed after it
    returns. When ``session`` returns (or the connect fails) this waits, doubling
    from ``min_delay`` to ``max_delay`` while attempts keep failing (a session whose
    set-up raises never resets it), before the next attempt; ``kick()``
    returns an event that ends that wait early (set it after starting the daemon).
    A daemon that restarts gives no signal a client could wait on, so a bounded
    back-off is the only portable way to notice it is back; it is not used for data.

    It does not start the daemon itself: a deliberate ``thrum daemon stop`` is
    respected; whoever needs the daemon now starts it and kicks.
    """
    delay = min_delay
    while True:
        reason = ""
        try:
            async with open_client(paths, on_notification=on_notification) as client:
                await session(client)
                reason = client.close_reason or "session ended"
            delay = min_delay  # a session that ran: its end (a daemon restart) is retried at once
        except ThrumError as exc:  # Unavailable, or the session's own set-up failing: back off
            reason = exc.message
        if on_disconnect is not None:
            on_disconnect(reason)
        with anyio.move_on_after(delay):
            if kick is not None:
                await kick().wait()
            else:
                await anyio.sleep_forever()
        delay = min(delay * 2, max_delay)

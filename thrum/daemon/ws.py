"""JSON-RPC over a WebSocket on 127.0.0.1, path ``/ws``: the Unix socket's methods for browsers and tools.

Rules:

1. Port: ``config.ws_port`` (9999) when free, else whatever the kernel gives;
   the port in use is written to ``.thrum/var/ws.port`` once listening and
   removed on shutdown.
2. Who may connect (token, Origin, the Web UI's session) is the handshake's
   `thrum.daemon.wsgate.Gate`; each refusal is logged here with the peer and
   reason, never with the token.
3. One message is one JSON-RPC request (or batch), text or binary; replies go
   out as text frames. Requests run concurrently (a long ``message.wait`` does
   not hold up the next request); notifications go through the connection's
   bounded outbox. A frame larger than `MAX_FRAME` is answered with -32600; one
   larger than the hard cap closes the socket with 1009. Nothing a client sends
   takes the server down.
4. Limits (`thrum.daemon.limits`, shared with the Unix socket): a client over
   the connection cap is answered ``503`` before the handshake; the handshake
   must finish within ``request_timeout``; the bytes of a message still arriving
   (counted as they come off the socket) draw on the shared buffer budget and
   must complete within ``request_timeout`` (else close 1008; an overdrawn budget
   closes with 1013, "try again later"); at most ``max_requests_in_flight``
   requests run at once; an idle connection closes after ``idle_timeout``.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketRequest, WebSocketServer

from .. import errors, jsonrpc
from ..config import Config
from ..paths import ThrumPaths
from .connection import Connection, is_disconnect
from .dispatch import handle_frame
from .limits import BudgetExceeded, Guard, Registry
from .serving import Serving
from .wsgate import BROWSER, HOST, PATH, BrowserAccess, Gate, write_token

log = logging.getLogger(__name__)

MAX_FRAME = 32 * 1024 * 1024  # answered with a JSON-RPC error above this (config: ws_max_frame_bytes)
RECEIVE_QUEUE = 0  # whole messages trio-websocket holds before we take them: none (the
# reader hands each over, so what waits is counted as still arriving)


# ---------------------------------------------------------------------------- files


def _write_port(path: Path, port: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, path)


def _remove_port(path: Path, port: int) -> None:
    """Remove the port file if it still names our port (a newer daemon may have replaced it)."""
    try:
        if path.read_text().strip() == str(port):
            path.unlink()
    except (OSError, ValueError):
        pass


async def _open_listeners(port: int) -> list[trio.SocketListener]:
    if port:
        try:
            return await trio.open_tcp_listeners(port, host=HOST)
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise
            log.info("WebSocket port %d is taken (%s); using a free port instead", port, exc.strerror)
    return await trio.open_tcp_listeners(0, host=HOST)


# ---------------------------------------------------------------------------- server


async def serve_ws(
    serving: Serving,
    config: Config,
    paths: ThrumPaths,
    browser: BrowserAccess | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; ``task_status.started(port)`` once listening.

    ``browser``: the Web UI's page, as the gate admits it (`thrum.daemon.wsgate`), or None.
    """
    cfg = config.values
    max_frame = int(cfg.get("ws_max_frame_bytes") or MAX_FRAME)
    listeners = await _open_listeners(int(cfg.get("ws_port") or 0))
    port: int = listeners[0].socket.getsockname()[1]
    gate = Gate(write_token(paths.ws_token_file), port, browser)
    guarded = [GuardedListener(listener, serving.registry) for listener in listeners]
    # trio-websocket types its listeners as trio's own; any trio.abc.Listener serves (it only accepts)
    as_listeners: list[Any] = list(guarded)
    server = WebSocketServer(
        partial(_handle_request, serving, gate, max_frame, guarded),
        as_listeners,
        message_queue_size=RECEIVE_QUEUE,
        # trio-websocket closes with 1009 above this; below it we answer a JSON-RPC error
        max_message_size=max_frame + 1024 * 1024,
        connect_timeout=serving.registry.limits.request_timeout,
        disconnect_timeout=5,
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            _write_port(paths.ws_port_file, port)
            log.info("WebSocket listening on ws://%s:%d%s", HOST, port, PATH)
            task_status.started(port)
    finally:
        _remove_port(paths.ws_port_file, port)


class GuardedStream(trio.abc.Stream):
    """A client's TCP stream that counts what arrives against its `Guard`.

    Bytes received since the last whole message was taken are "still arriving":
    they draw on the shared budget and start the request clock. Closing the
    stream gives the connection's slot back. Its ``repr`` is unique: it is what
    trio-websocket reports as the request's ``remote`` for a wrapped stream, and
    how the handler finds the guard.
    """

    _numbers = itertools.count(1)

    def __init__(self, inner: trio.SocketStream, guard: Guard, on_close: Callable[[GuardedStream], None]):
        self.inner = inner
        self.guard = guard
        self._on_close = on_close
        try:
            host, port = inner.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        self._name = f"<client {peer} #{next(self._numbers)}>"

    def __repr__(self) -> str:
        return self._name

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        data = await self.inner.receive_some(max_bytes)
        if data:
            try:
                self.guard.received(self.guard.partial + len(data))
            except BudgetExceeded as exc:
                self.guard.close(f"budget: {exc}")
        return data

    async def aclose(self) -> None:
        self.guard.release()
        self._on_close(self)
        await self.inner.aclose()


class GuardedListener(trio.abc.Listener[GuardedStream]):
    """Admits TCP clients under the daemon's connection cap; answers 503 to the rest."""

    def __init__(self, inner: trio.SocketListener, registry: Registry):
        self.inner = inner
        self.socket = inner.socket
        self.registry = registry
        self.streams: dict[str, GuardedStream] = {}

    async def accept(self) -> GuardedStream:
        while True:
            stream = await self.inner.accept()
            guard = self.registry.admit("ws")
            if guard is not None:
                guarded = GuardedStream(stream, guard, self._closed)
                self.streams[repr(guarded)] = guarded
                return guarded
            await _refuse_http(stream, 503, self.registry.refusal())

    def _closed(self, stream: GuardedStream) -> None:
        self.streams.pop(repr(stream), None)

    def guard_for(self, remote: object) -> Guard | None:
        stream = self.streams.get(str(remote))
        return stream.guard if stream is not None else None

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _refuse_http(stream: trio.SocketStream, status: int, reason: str) -> None:
    body = reason.encode() + b"\n"
    head = (
        f"HTTP/1.1 {status} Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with trio.move_on_after(1):
        try:
            await stream.send_all(head + body)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    with trio.CancelScope(shield=True):
        await stream.aclose()


async def _handle_request(
    serving: Serving, gate: Gate, max_frame: int, listeners: list[GuardedListener], request: WebSocketRequest
) -> None:
    """One client from handshake to close. Never raises (one client must not stop the server)."""
    peer = _peer(request)
    guard = None
    for listener in listeners:
        guard = guard or listener.guard_for(request.remote)
    if guard is None:  # not through our listener (cannot happen); serve it under fresh limits
        guard = serving.registry.admit("ws")
        if guard is None:
            await request.reject(503, body=serving.registry.refusal().encode() + b"\n")
            return
    try:
        verdict = gate.check(request.path, request.headers, request.proposed_subprotocols)
        if isinstance(verdict, tuple):
            status, reason = verdict
            log.warning("WebSocket refused %d for %s %s: %s", status, peer, urlsplit(request.path).path[:100], reason)
            await request.reject(
                status, extra_headers=[(b"Content-Type", b"text/plain; charset=utf-8")], body=reason.encode() + b"\n"
            )
            return
        browser = verdict == BROWSER
        ws = await request.accept(subprotocol=gate.browser.protocol if browser and gate.browser else None)
    except ConnectionClosed:
        return
    except Exception:
        log.exception("WebSocket handshake with %s failed", peer)
        return
    try:
        await _serve_connection(serving, ws, max_frame, guard, observer=browser)
    finally:
        guard.release()


async def _serve_connection(
    serving: Serving, ws: WebSocketConnection, max_frame: int, guard: Guard, *, observer: bool = False
) -> None:
    async def send_text(data: bytes) -> None:
        await ws.send_message(data.decode("utf-8"))

    conn = Connection(
        "ws",
        send_text,
        queue_size=serving.queue_size,
        framing_newline=False,
        send_timeout=guard.limits.send_timeout,
        on_stuck=guard.close,
        observer=observer,
    )
    # bytes of pings and frame headers count as arriving too; trio-websocket's size of the
    # message being assembled (private; absent: assume one is) says whether one really is
    guard.belongs_to(conn, partial_probe=lambda: getattr(ws, "_message_size", 1) > 0)
    serving.opened(conn)
    log.debug("WebSocket %s connected", conn.id)
    close_code, close_reason = 1000, None
    try:
        async with trio.open_nursery() as nursery:
            guard.close_with(nursery.cancel_scope)
            nursery.start_soon(_run_outbox, conn)
            close_code, close_reason = await _read_messages(serving, ws, conn, guard, max_frame, nursery)
            conn.close()
            nursery.cancel_scope.cancel()
    except Exception as exc:  # never let one client take the daemon down
        if not is_disconnect(exc, (ConnectionClosed,)):
            log.exception("WebSocket connection %s failed", conn.id)
    finally:
        reason = guard.close_reason
        close_code, close_reason = _close_frame(reason, close_code, close_reason)
        if reason and not reason.startswith("idle"):
            log.info("closing WebSocket %s: %s", conn.id, reason)
        with trio.CancelScope(shield=True), trio.move_on_after(2):
            try:
                await ws.aclose(close_code, (close_reason or "")[:120] or None)
            except Exception:
                pass
        conn.close()
        try:
            serving.closed(conn)
        except Exception:
            log.exception("closing WebSocket connection %s", conn.id)
        log.debug("WebSocket %s closed", conn.id)


async def _read_messages(
    serving: Serving,
    ws: WebSocketConnection,
    conn: Connection,
    guard: Guard,
    max_frame: int,
    nursery: trio.Nursery,
) -> tuple[int, str | None]:
    """Hand each message to a handler of its own until the client closes, or a clock runs
    out; the close frame to send (code, reason)."""
    while True:
        with guard.waiting() as waiting:
            try:
                message = await ws.get_message()
            except ConnectionClosed:
                return 1000, None
        if waiting.cancelled_caught:
            reason = guard.expired()
            if reason is None:
                continue
            guard.closing(reason)
            return (1000, "idle") if reason.startswith("idle") else (1008, reason)
        guard.started(len(message), remaining=0)
        ticket = object()
        await guard.in_flight.acquire_on_behalf_of(ticket)
        nursery.start_soon(_answer, serving, conn, message, max_frame, guard, ticket)


def _close_frame(reason: str | None, code: int, text: str | None) -> tuple[int, str | None]:
    """The close frame: the guard's reason, when it closed the connection (an overdrawn
    budget: 1013, "try again later"; another limit: 1008), over the read loop's."""
    if reason and reason.startswith("budget: "):
        return 1013, reason[len("budget: ") :]
    if reason and text is None and not reason.startswith("idle"):
        return 1008, reason
    return code, text


async def _run_outbox(conn: Connection) -> None:
    try:
        await conn.run_outbox()
    except ConnectionClosed:
        conn.close()


async def _answer(
    serving: Serving, conn: Connection, message: str | bytes, max_frame: int, guard: Guard, ticket: object
) -> None:
    size = len(message)
    try:
        if size > max_frame:
            answer = jsonrpc.failure(
                None, errors.InvalidRequest(f"request too large ({size} bytes; the limit is {max_frame})")
            )
        else:
            answer = await handle_frame(serving.services, conn, message, max_batch=guard.limits.max_batch)
        del message
        if answer is not None and not conn.closed:
            try:
                await conn.send(answer)
            except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
                conn.close()
    finally:
        guard.in_flight.release_on_behalf_of(ticket)
        guard.finished(size)


def _peer(request: WebSocketRequest) -> str:
    try:
        remote = request.remote
        return str(remote) if isinstance(remote, str) else f"{remote.address}:{remote.port}"
    except Exception:
        return "?"

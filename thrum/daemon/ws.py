"""JSON-RPC over a WebSocket on 127.0.0.1, path ``/ws``: the Unix socket's methods for browsers and tools.

Rules:

1. Port: ``config.ws_port`` (9999) when free, else whatever the kernel gives;
   the port in use is written to ``.thrum/var/ws.port`` once listening and
   removed on shutdown.
2. Token: a fresh random token at every daemon start in ``.thrum/var/ws.token``
   (born 0600, replaced atomically, written before the port file). A client
   presents it as ``Authorization: Bearer <token>`` or as the ``token`` query
   parameter; anything else is refused with 401.
3. Origin: any web page can open a socket to localhost, so a request carrying a
   browser ``Origin`` other than this daemon's own (``http://127.0.0.1:<port>``,
   ``http://localhost:<port>``) or its Web UI's is refused with 403, token or not.
   Clients that send no Origin (CLIs, scripts, agents) are not browsers and pass
   this check. A request from the Web UI's origin is admitted only with both
   halves of a UI session (``browser.admits``, thrum.ui.access): its cookie and
   the page key, offered as the subprotocol ``thrum-key.<K>`` (answered with
   ``thrum``); never by token. Such a connection is an observer: nothing it does
   marks an agent as seen (docs/design/ui.md, "Presence").
4. Every refusal is answered with a one-line plain-text body saying why and is
   logged with the peer and reason, never with the token.
5. One message is one JSON-RPC request (or batch), text or binary; replies go
   out as text frames. Requests run concurrently (a long ``message.wait`` does
   not hold up the next request); notifications go through the connection's
   bounded outbox. A frame larger than `MAX_FRAME` is answered with -32600; one
   larger than the hard cap closes the socket with 1009. Nothing a client sends
   takes the server down.
6. Limits (`thrum.daemon.limits`, shared with the Unix socket): a client over
   the connection cap is answered ``503`` before the handshake; the handshake
   must finish within ``request_timeout``; the bytes of a message still arriving
   (counted as they come off the socket) draw on the shared buffer budget and
   must complete within ``request_timeout`` (else close 1008; an overdrawn budget
   closes with 1013, "try again later"); at most ``max_requests_in_flight``
   requests run at once; an idle connection closes after ``idle_timeout``.
"""

from __future__ import annotations

import errno
import hmac
import itertools
import logging
import os
import secrets
from functools import partial
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, WebSocketServer

from .. import errors, jsonrpc
from .connection import Connection, is_disconnect
from .dispatch import handle_frame
from .limits import BudgetExceeded, Guard, Registry

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
PATH = "/ws"
MAX_FRAME = 32 * 1024 * 1024  # answered with a JSON-RPC error above this (config: ws_max_frame_bytes)
RECEIVE_QUEUE = 0  # whole messages trio-websocket holds before we take them: none (the
# reader hands each over, so what waits is counted as still arriving)


# ---------------------------------------------------------------------------- files


def write_token(path: Path) -> str:
    """A new random token in ``path``: mode 0600 from birth, replaced atomically."""
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, token.encode("ascii") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return token


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


async def serve_ws(daemon, browser=None, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled; ``task_status.started(port)`` once listening.

    ``browser``: the Web UI's access rules (``origins``, ``key_in(protocols)``,
    ``admits(cookie_header, key)``, ``protocol``), or None.
    """
    cfg = daemon.config.values
    max_frame = int(cfg.get("ws_max_frame_bytes") or MAX_FRAME)
    listeners = await _open_listeners(int(cfg.get("ws_port") or 0))
    port = listeners[0].socket.getsockname()[1]
    gate = Gate(write_token(daemon.paths.ws_token_file), port, browser)
    guarded = [GuardedListener(listener, daemon.registry) for listener in listeners]
    server = WebSocketServer(
        partial(_handle_request, daemon, gate, max_frame, guarded),
        guarded,
        message_queue_size=RECEIVE_QUEUE,
        # trio-websocket closes with 1009 above this; below it we answer a JSON-RPC error
        max_message_size=max_frame + 1024 * 1024,
        connect_timeout=daemon.registry.limits.request_timeout,
        disconnect_timeout=5,
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            _write_port(daemon.paths.ws_port_file, port)
            log.info("WebSocket listening on ws://%s:%d%s", HOST, port, PATH)
            task_status.started(port)
    finally:
        _remove_port(daemon.paths.ws_port_file, port)


BROWSER = "browser"  # Gate.check's verdict for the Web UI's page
CLIENT = "client"  # ... for a client with the token


class Gate:
    """The handshake checks: path, Origin, token (or the Web UI's session). Pure apart from the logger."""

    def __init__(self, token: str, port: int, browser=None):
        self._token = token.encode("ascii")
        self.port = port
        self.origins = frozenset({f"http://{HOST}:{port}", f"http://localhost:{port}"})
        self.browser = browser

    def check(
        self, target: str, headers: list[tuple[bytes, bytes]], protocols: tuple[str, ...] = ()
    ) -> str | tuple[int, str]:
        """`BROWSER` or `CLIENT` to accept, else (HTTP status, reason).

        ``protocols``: the subprotocols the client proposed (the page offers its key there)."""
        url = urlsplit(target)
        if url.path != PATH:
            return 404, f"not found: the thrum WebSocket is at {PATH}"
        origin = _header(headers, b"origin")
        if origin is not None and self.browser is not None and origin.rstrip("/").lower() in self.browser.origins:
            key = self.browser.key_in(protocols)
            if self.browser.admits(_header(headers, b"cookie"), key):
                return BROWSER
            return 401, (
                "unauthorized: no valid Web UI session (its cookie and its page key); run `thrum ui` "
                "and open the URL it prints"
            )
        if origin is not None and origin.rstrip("/").lower() not in self.origins:
            return 403, (
                f"forbidden: Origin {origin[:100]!r} may not use this daemon "
                f"(only http://{HOST}:{self.port} and http://localhost:{self.port})"
            )
        presented = None
        auth = _header(headers, b"authorization")
        if auth is not None:
            scheme, _, value = auth.strip().partition(" ")
            if scheme.lower() == "bearer" and value.strip():
                presented = value.strip()
        if presented is None:
            values = parse_qs(url.query).get("token")
            if values:
                presented = values[-1]
        if presented is None:
            return 401, (
                "unauthorized: present the token from .thrum/var/ws.token as "
                "'Authorization: Bearer <token>' or the 'token' query parameter"
            )
        if not hmac.compare_digest(presented.encode("utf-8", "surrogateescape"), self._token):
            return 401, "unauthorized: wrong token (it changes at every daemon start; read .thrum/var/ws.token again)"
        return CLIENT


class GuardedStream(trio.abc.Stream):
    """A client's TCP stream that counts what arrives against its `Guard`.

    Bytes received since the last whole message was taken are "still arriving":
    they draw on the shared budget and start the request clock. Closing the
    stream gives the connection's slot back. Its ``repr`` is unique: it is what
    trio-websocket reports as the request's ``remote`` for a wrapped stream, and
    how the handler finds the guard.
    """

    _numbers = itertools.count(1)

    def __init__(self, inner: trio.SocketStream, guard: Guard, on_close):
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

    async def send_all(self, data) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes=None) -> bytes:
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


class GuardedListener(trio.abc.Listener):
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

    def guard_for(self, remote) -> Guard | None:
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


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _handle_request(
    daemon, gate: Gate, max_frame: int, listeners: list[GuardedListener], request: WebSocketRequest
) -> None:
    """One client from handshake to close. Never raises (one client must not stop the server)."""
    peer = _peer(request)
    guard = None
    for listener in listeners:
        guard = guard or listener.guard_for(request.remote)
    if guard is None:  # not through our listener (cannot happen); serve it under fresh limits
        guard = daemon.registry.admit("ws")
        if guard is None:
            await request.reject(503, body=daemon.registry.refusal().encode() + b"\n")
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
        ws = await request.accept(subprotocol=gate.browser.protocol if browser else None)
    except ConnectionClosed:
        return
    except Exception:
        log.exception("WebSocket handshake with %s failed", peer)
        return
    try:
        await _serve_connection(daemon, ws, max_frame, guard, observer=browser)
    finally:
        guard.release()


async def _serve_connection(daemon, ws, max_frame: int, guard: Guard, *, observer: bool = False) -> None:
    async def send_text(data: bytes) -> None:
        await ws.send_message(data.decode("utf-8"))

    conn = Connection(
        "ws",
        send_text,
        queue_size=daemon.config.ws_queue_size,
        framing_newline=False,
        send_timeout=guard.limits.send_timeout,
        on_stuck=guard.close,
        observer=observer,
    )
    guard.subscribed = lambda: daemon.hub is not None and daemon.hub.serves(conn)
    guard.conn = conn
    # bytes of pings and frame headers count as arriving too; trio-websocket's size of the
    # message being assembled (private; absent: assume one is) says whether one really is
    guard.partial_probe = lambda: getattr(ws, "_message_size", 1) > 0
    daemon.connections.add(conn)
    log.debug("WebSocket %s connected", conn.id)
    close_code, close_reason = 1000, None
    try:
        async with trio.open_nursery() as nursery:
            guard.scope = nursery.cancel_scope
            nursery.start_soon(_run_outbox, conn)
            while True:
                with trio.CancelScope(deadline=guard.deadline()) as waiting:
                    guard.wait_scope = waiting
                    try:
                        message = await ws.get_message()
                    except ConnectionClosed:
                        break
                    finally:
                        guard.wait_scope = None
                if waiting.cancelled_caught:
                    reason = guard.expired()
                    if reason is None:
                        continue
                    guard.close_reason = reason
                    close_code, close_reason = (1000, "idle") if reason.startswith("idle") else (1008, reason)
                    break
                guard.started(len(message), remaining=0)
                ticket = object()
                await guard.in_flight.acquire_on_behalf_of(ticket)
                nursery.start_soon(_answer, daemon, conn, message, max_frame, guard, ticket)
            conn.close()
            nursery.cancel_scope.cancel()
    except Exception as exc:  # never let one client take the daemon down
        if not is_disconnect(exc, (ConnectionClosed,)):
            log.exception("WebSocket connection %s failed", conn.id)
    finally:
        reason = guard.close_reason
        if reason and reason.startswith("budget: "):
            close_code, close_reason = 1013, reason[len("budget: ") :]
        elif reason and close_reason is None and not reason.startswith("idle"):
            close_code, close_reason = 1008, reason
        if reason and not reason.startswith("idle"):
            log.info("closing WebSocket %s: %s", conn.id, reason)
        with trio.CancelScope(shield=True), trio.move_on_after(2):
            try:
                await ws.aclose(close_code, (close_reason or "")[:120] or None)
            except Exception:
                pass
        conn.close()
        daemon.connections.discard(conn)
        with trio.CancelScope(shield=True):
            try:
                await daemon.connection_closed(conn)
            except Exception:
                log.exception("closing WebSocket connection %s", conn.id)
        log.debug("WebSocket %s closed", conn.id)


async def _run_outbox(conn: Connection) -> None:
    try:
        await conn.run_outbox()
    except ConnectionClosed:
        conn.close()


async def _answer(daemon, conn: Connection, message: str | bytes, max_frame: int, guard: Guard, ticket: object) -> None:
    size = len(message)
    try:
        if size > max_frame:
            answer = jsonrpc.failure(
                None, errors.InvalidRequest(f"request too large ({size} bytes; the limit is {max_frame})")
            )
        else:
            answer = await handle_frame(daemon, conn, message, max_batch=guard.limits.max_batch)
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
        return f"{remote.address}:{remote.port}" if hasattr(remote, "port") else str(remote)
    except Exception:
        return "?"

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
   this check. A request from the Web UI's origin is admitted only with the UI's
   session cookie (``browser.admits``, thrum.ui.access), never by token.
4. Every refusal is answered with a one-line plain-text body saying why and is
   logged with the peer and reason, never with the token.
5. One message is one JSON-RPC request (or batch), text or binary; replies go
   out as text frames. Requests run concurrently (a long ``message.wait`` does
   not hold up the next request); notifications go through the connection's
   bounded outbox. A frame larger than `MAX_FRAME` is answered with -32600; one
   larger than the hard cap closes the socket with 1009. Nothing a client sends
   takes the server down.
"""

from __future__ import annotations

import errno
import hmac
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

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
PATH = "/ws"
MAX_FRAME = 32 * 1024 * 1024      # answered with a JSON-RPC error above this (config: ws_max_frame_bytes)
MAX_IN_FLIGHT = 256               # requests running at once per connection before reading pauses
RECEIVE_QUEUE = 4                 # whole messages trio-websocket buffers before we take them


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

    ``browser``: the Web UI's access rules (``origins``, ``admits(cookie_header)``), or None.
    """
    cfg = daemon.config.values
    max_frame = int(cfg.get("ws_max_frame_bytes") or MAX_FRAME)
    listeners = await _open_listeners(int(cfg.get("ws_port") or 0))
    port = listeners[0].socket.getsockname()[1]
    gate = Gate(write_token(daemon.paths.ws_token_file), port, browser)
    server = WebSocketServer(
        partial(_handle_request, daemon, gate, max_frame), listeners,
        message_queue_size=RECEIVE_QUEUE,
        # trio-websocket closes with 1009 above this; below it we answer a JSON-RPC error
        max_message_size=max_frame + 1024 * 1024,
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            _write_port(daemon.paths.ws_port_file, port)
            log.info("WebSocket listening on ws://%s:%d%s", HOST, port, PATH)
            task_status.started(port)
    finally:
        _remove_port(daemon.paths.ws_port_file, port)


class Gate:
    """The handshake checks: path, Origin, token (or the Web UI's cookie). Pure apart from the logger."""

    def __init__(self, token: str, port: int, browser=None):
        self._token = token.encode("ascii")
        self.port = port
        self.origins = frozenset({f"http://{HOST}:{port}", f"http://localhost:{port}"})
        self.browser = browser

    def check(self, target: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
        """None to accept, else (HTTP status, reason)."""
        url = urlsplit(target)
        if url.path != PATH:
            return 404, f"not found: the thrum WebSocket is at {PATH}"
        origin = _header(headers, b"origin")
        if origin is not None and self.browser is not None and origin.rstrip("/").lower() in self.browser.origins:
            if self.browser.admits(_header(headers, b"cookie")):
                return None
            return 401, ("unauthorized: no valid Web UI session; run `thrum ui` and open the URL it prints "
                         "(sessions end when the daemon restarts)")
        if origin is not None and origin.rstrip("/").lower() not in self.origins:
            return 403, (f"forbidden: Origin {origin[:100]!r} may not use this daemon "
                         f"(only http://{HOST}:{self.port} and http://localhost:{self.port})")
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
            return 401, ("unauthorized: present the token from .thrum/var/ws.token as "
                         "'Authorization: Bearer <token>' or the 'token' query parameter")
        if not hmac.compare_digest(presented.encode("utf-8", "surrogateescape"), self._token):
            return 401, "unauthorized: wrong token (it changes at every daemon start; read .thrum/var/ws.token again)"
        return None


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _handle_request(daemon, gate: Gate, max_frame: int, request: WebSocketRequest) -> None:
    """One client from handshake to close. Never raises (one client must not stop the server)."""
    peer = _peer(request)
    try:
        refusal = gate.check(request.path, request.headers)
        if refusal is not None:
            status, reason = refusal
            log.warning("WebSocket refused %d for %s %s: %s", status, peer, urlsplit(request.path).path[:100], reason)
            await request.reject(status, extra_headers=[(b"Content-Type", b"text/plain; charset=utf-8")],
                                 body=reason.encode() + b"\n")
            return
        ws = await request.accept()
    except ConnectionClosed:
        return
    except Exception:
        log.exception("WebSocket handshake with %s failed", peer)
        return
    await _serve_connection(daemon, ws, max_frame)


async def _serve_connection(daemon, ws, max_frame: int) -> None:
    async def send_text(data: bytes) -> None:
        await ws.send_message(data.decode("utf-8"))

    conn = Connection("ws", send_text, queue_size=daemon.config.ws_queue_size, framing_newline=False)
    daemon.connections.add(conn)
    log.debug("WebSocket %s connected", conn.id)
    in_flight = trio.CapacityLimiter(MAX_IN_FLIGHT)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_run_outbox, conn)
            while True:
                try:
                    message = await ws.get_message()
                except ConnectionClosed:
                    break
                ticket = object()
                await in_flight.acquire_on_behalf_of(ticket)
                nursery.start_soon(_answer, daemon, conn, message, max_frame, in_flight, ticket)
            conn.close()
            nursery.cancel_scope.cancel()
    except Exception as exc:  # never let one client take the daemon down
        if not is_disconnect(exc, (ConnectionClosed,)):
            log.exception("WebSocket connection %s failed", conn.id)
    finally:
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


async def _answer(daemon, conn: Connection, message: str | bytes, max_frame: int,
                  in_flight: trio.CapacityLimiter, ticket: object) -> None:
    try:
        if len(message) > max_frame:
            answer = jsonrpc.failure(None, errors.InvalidRequest(
                f"request too large ({len(message)} bytes; the limit is {max_frame})"))
        else:
            answer = await handle_frame(daemon, conn, message)
        if answer is not None and not conn.closed:
            try:
                await conn.send(answer)
            except ConnectionClosed:
                conn.close()
    finally:
        in_flight.release_on_behalf_of(ticket)


def _peer(request: WebSocketRequest) -> str:
    try:
        remote = request.remote
        return f"{remote.address}:{remote.port}" if hasattr(remote, "port") else str(remote)
    except Exception:
        return "?"



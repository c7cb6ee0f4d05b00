"""A small HTTP/1.1 server on trio + h11: enough to serve the Web UI's page and its login.

h11 does the protocol (parsing, framing, keep-alive); this module only moves
bytes and enforces limits.

Rules:

1. Every connection is admitted by the daemon's connection registry
   (thrum.daemon.limits; passed in, not imported): the same cap as the Unix
   socket and the WebSocket (over it, ``503`` and close; an idle connection of
   any transport may be closed to make room), the same budget for bytes of
   unfinished requests, and the same clocks: a request must arrive whole
   within ``request_timeout`` of its first byte (else ``408`` and close), a
   connection with nothing arriving closes after ``idle_timeout``, and an answer
   the client does not take within ``send_timeout`` closes it.
2. Requests on one connection are answered one after another (keep-alive).
3. A request head that is still incomplete after `MAX_HEAD` bytes is answered
   431 (one read of up to `MAX_HEAD` more may complete it: a head is at most
   twice that); a body larger than `MAX_BODY` 413; then the connection closes.
   Bodies are read and dropped (the UI takes none).
4. The handler is a plain function ``Request -> Response``. If it raises, the
   client gets a 500 and the error is logged; nothing a client sends stops the
   server.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import h11
import trio

log = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024
_RECEIVE = MAX_HEAD


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    headers: dict[str, str]  # lower-case names; the first of repeated headers

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    def query(self, name: str) -> str | None:
        values = parse_qs(urlsplit(self.target).query).get(name)
        return values[-1] if values else None

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    content_type: str = "text/plain; charset=utf-8"


Handler = Callable[[Request], Response]


async def serve(
    handler: Handler,
    listeners: list[trio.SocketListener],
    registry: Any,
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; ``task_status.started()`` once accepting.

    ``registry``: the daemon's `thrum.daemon.limits.Registry` (``admit``, ``refusal``).
    """
    await trio.serve_listeners(partial(_serve_stream, handler, registry), listeners, task_status=task_status)


async def _serve_stream(handler: Handler, registry: Any, stream: trio.SocketStream) -> None:
    async with stream:
        guard = registry.admit("ui")
        if guard is None:
            await _refuse(stream, 503, registry.refusal())
            return
        try:
            with trio.CancelScope() as scope:
                guard.close_with(scope)  # eviction (an idle connection making room) cancels it
                await _serve_requests(handler, guard, stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError):
            pass
        except Exception:
            log.exception("Web UI connection failed")
        finally:
            guard.release()


async def _serve_requests(handler: Handler, guard: Any, stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    while True:
        request, size = await _next_request(conn, stream, guard)
        if request is None:
            return
        if isinstance(request, Response):  # the client broke the protocol or the limits
            await _refuse(stream, request.status, request.body.decode().strip())
            return
        guard.started(size, remaining=0)
        try:
            response = handler(request)
        except Exception:
            log.exception("Web UI handler failed for %s %s", request.method, request.path[:100])
            response = Response(500, b"internal error; see daemon.log\n")
        try:
            sent = await _send(
                conn, stream, response, head_only=request.method == "HEAD", within=guard.limits.send_timeout
            )
        finally:
            guard.finished(size)
        if not sent or conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
            return
        try:
            conn.start_next_cycle()
        except h11.LocalProtocolError:
            return


async def _next_request(
    conn: h11.Connection, stream: trio.SocketStream, guard: Any
) -> tuple[Request | Response | None, int]:
    """(The next complete request (body dropped), a refusal to send, or None: closed / idle), its size."""
    request = None
    size = body = 0
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
                return None, size
            status = exc.error_status_hint
            reason = "request head too large" if status == 431 else "bad request"
            return Response(status, f"{reason}\n".encode(), headers=[("Connection", "close")]), size
        if event is h11.NEED_DATA:
            refusal, size, done = await _feed(conn, stream, guard, size)
            if done:
                return refusal, size
            continue
        if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            return None, size
        if isinstance(event, h11.Request):
            headers: dict[str, str] = {}
            for name, value in event.headers:
                headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
            request = Request(event.method.decode("ascii", "replace").upper(), event.target.decode("latin-1"), headers)
        elif isinstance(event, h11.Data):
            body += len(event.data)
            if body > MAX_BODY:
                return Response(413, b"request body too large\n", headers=[("Connection", "close")]), size
        elif isinstance(event, h11.EndOfMessage):
            return request, size


async def _feed(
    conn: h11.Connection, stream: trio.SocketStream, guard: Any, size: int
) -> tuple[Response | None, int, bool]:
    """Hand h11 what arrives next: (a refusal to send, the request's bytes so far, whether
    this connection is done: idle, too slow, or over the shared budget)."""
    with guard.waiting() as waiting:
        data = await stream.receive_some(_RECEIVE)
    if waiting.cancelled_caught:
        reason = guard.expired()
        if reason is None:
            return None, size, False
        if reason.startswith("idle"):
            return None, size, True
        log.info("Web UI: closing a connection: %s", reason)
        return Response(408, f"{reason}\n".encode(), headers=[("Connection", "close")]), size, True
    if data:
        size += len(data)
        try:
            guard.received(size)
        except Exception as exc:  # BudgetExceeded: the daemon's shared buffer budget is spent
            return Response(503, f"{exc}\n".encode(), headers=[("Connection", "close")]), size, True
    conn.receive_data(data)  # b"" marks the peer's end of stream
    return None, size, False


_PHRASES = {
    400: "Bad Request",
    408: "Request Timeout",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
}


async def _refuse(stream: trio.SocketStream, status: int, reason: str) -> None:
    """A whole answer that closes the connection, written by hand: h11 may have no request
    to answer (over the cap, timed out, a broken head)."""
    body = reason.encode() + b"\n"
    head = (
        f"HTTP/1.1 {status} {_PHRASES.get(status, 'Service Unavailable')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with trio.move_on_after(1):
        try:
            await stream.send_all(head + body)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass


async def _send(
    conn: h11.Connection, stream: trio.SocketStream, response: Response, *, head_only: bool, within: float
) -> bool:
    """Send ``response``; False when the client did not take it within ``within`` seconds."""
    if response.status in (204, 304):  # no body, and no framing headers that would describe one
        headers = list(response.headers)
    else:
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            *response.headers,
        ]
    data = conn.send(
        h11.Response(
            status_code=response.status, headers=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        )
    )
    if response.body and not head_only and response.status not in (204, 304):
        data += conn.send(h11.Data(data=response.body))
    data += conn.send(h11.EndOfMessage())
    with trio.move_on_after(within):
        await stream.send_all(data)
        return True
    return False

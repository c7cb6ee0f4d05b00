"""A small HTTP/1.1 server on trio + h11: enough to serve the Web UI's page and its login.

h11 does the protocol (parsing, framing, keep-alive); this module only moves
bytes and enforces limits.

Rules:

1. Requests on one connection are answered one after another (keep-alive).
   A request head must arrive within `HEAD_TIMEOUT` seconds of the previous
   answer (or of the connection opening), or the connection is closed: an idle
   or trickling client cannot hold a slot forever.
2. A request head that is still incomplete after `MAX_HEAD` bytes is answered
   431 (one read of up to `MAX_HEAD` more may complete it: a head is at most
   twice that); a body larger than `MAX_BODY` 413; then the connection closes. Bodies are read and dropped (the
   UI takes none).
3. At most `MAX_CONNECTIONS` connections are served at once; more are accepted
   but wait for a slot before anything is read from them.
4. The handler is a plain function ``Request -> Response``. If it raises, the
   client gets a 500 and the error is logged; nothing a client sends stops the
   server.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Callable
from urllib.parse import parse_qs, urlsplit

import h11
import trio

log = logging.getLogger(__name__)

HEAD_TIMEOUT = 30.0
MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024
MAX_CONNECTIONS = 64
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


async def serve(handler: Handler, listeners: list, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled; ``task_status.started()`` once accepting."""
    limiter = trio.CapacityLimiter(MAX_CONNECTIONS)
    await trio.serve_listeners(partial(_serve_stream, handler, limiter), listeners, task_status=task_status)


async def _serve_stream(handler: Handler, limiter: trio.CapacityLimiter, stream) -> None:
    async with limiter:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        try:
            while True:
                request = await _next_request(conn, stream)
                if request is None:
                    return
                if isinstance(request, Response):  # the client broke the protocol
                    await _send(conn, stream, request, head_only=False)
                    return
                try:
                    response = handler(request)
                except Exception:
                    log.exception("Web UI handler failed for %s %s", request.method, request.path[:100])
                    response = Response(500, b"internal error; see daemon.log\n")
                await _send(conn, stream, response, head_only=request.method == "HEAD")
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError):
            return
        except Exception:
            log.exception("Web UI connection failed")


async def _next_request(conn: h11.Connection, stream) -> Request | Response | None:
    """The next complete request (body dropped), a refusal to send, or None (closed / timed out)."""
    request = None
    size = 0
    with trio.move_on_after(HEAD_TIMEOUT):
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
                    return None
                status = exc.error_status_hint
                reason = "request head too large" if status == 431 else "bad request"
                return Response(status, f"{reason}\n".encode(), headers=[("Connection", "close")])
            if event is h11.NEED_DATA:
                data = await stream.receive_some(_RECEIVE)
                conn.receive_data(data)  # b"" marks the peer's end of stream
                continue
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None
            if isinstance(event, h11.Request):
                headers: dict[str, str] = {}
                for name, value in event.headers:
                    headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
                request = Request(
                    event.method.decode("ascii", "replace").upper(), event.target.decode("latin-1"), headers
                )
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > MAX_BODY:
                    return Response(413, b"request body too large\n", headers=[("Connection", "close")])
            elif isinstance(event, h11.EndOfMessage):
                return request
    return None


async def _send(conn: h11.Connection, stream, response: Response, *, head_only: bool) -> None:
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
    await stream.send_all(data)

"""Newline-delimited JSON-RPC over the daemon's Unix socket (mode 0600).

Every connection lives under the limits of `thrum.daemon.limits`: admitted or
refused with one error line, its unfinished line counted against the shared
buffer budget and timed, its requests in flight capped (reading pauses at the
cap), its replies given `send_timeout` to be read.
"""

from __future__ import annotations

import errno
import logging
import os
import socket as stdsocket
import time
from pathlib import Path
from typing import Any

import trio
from trio import TaskStatus

from .. import errors, jsonrpc
from .connection import Connection, is_disconnect
from .dispatch import handle_frame
from .limits import BudgetExceeded, Guard
from .peer import peer_uid
from .serving import Serving

log = logging.getLogger(__name__)

MAX_LINE = 32 * 1024 * 1024  # a 16 MiB body JSON-escaped still fits
RECEIVE = 65536
BACKLOG = 512
_OUT_OF_DESCRIPTORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def remove_stale_socket(path: Path) -> None:
    """Remove a socket file nobody listens on (left by a crash). Caller holds the daemon lock."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


async def serve_unix(serving: Serving, path: Path, task_status: TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
    remove_stale_socket(path)
    sock = trio.socket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket is born 0600: no window where others can connect
    try:
        await sock.bind(str(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(BACKLOG)
    listener = trio.SocketListener(sock)
    try:
        async with trio.open_nursery() as nursery:
            task_status.started()
            await _accept_forever(serving, listener, nursery)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


async def _accept_forever(serving: Serving, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
    registry = serving.registry
    last_log = 0.0
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno not in _OUT_OF_DESCRIPTORS:
                raise
            # Only when something other than clients ate the headroom: say so now and
            # then, give the process a moment to close files, accept again.
            if time.monotonic() - last_log > 10:
                last_log = time.monotonic()
                log.warning("accept failed (%s); %d client connections open", exc.strerror, len(registry.guards))
            await trio.sleep(0.05)
            continue
        guard = registry.admit("unix")
        if guard is None:
            nursery.start_soon(_refuse, stream, registry.refusal())
        else:
            nursery.start_soon(_serve_stream, serving, stream, guard)


async def _refuse(stream: trio.SocketStream, message: str) -> None:
    """Tell a client over the cap why, in the protocol it speaks, and hang up."""
    with trio.move_on_after(1):
        try:
            await stream.send_all(jsonrpc.encode_line(jsonrpc.failure(None, errors.Unavailable(message))))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    # Closing with the client's request still unread makes the kernel reset the
    # connection, and the client may lose the line above: say we are done, then read
    # (a bounded amount, briefly) what it sent before hanging up.
    with trio.move_on_after(1):
        try:
            await stream.send_eof()
            drained = 0
            while drained < 65536 and (chunk := await stream.receive_some(4096)):
                drained += len(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    with trio.CancelScope(shield=True):
        await stream.aclose()


async def _serve_stream(serving: Serving, stream: trio.SocketStream, guard: Guard) -> None:
    limits = guard.limits
    conn = Connection(
        "unix",
        stream.send_all,
        queue_size=serving.queue_size,
        send_timeout=limits.send_timeout,
        on_stuck=guard.close,
        peer_uid=peer_uid(stream.socket),
        send_now=lambda data: os.write(stream.socket.fileno(), data),  # non-blocking: what fits the buffer
    )
    guard.belongs_to(conn)
    serving.opened(conn)
    try:
        async with trio.open_nursery() as nursery:
            guard.close_with(nursery.cancel_scope)
            nursery.start_soon(conn.run_outbox)
            refusal = await _read_requests(serving, conn, stream, guard, nursery)
            if refusal is not None:
                guard.closing(refusal.message)
                with trio.move_on_after(1):  # say why, unless the client does not read either
                    await _safe_send(conn, jsonrpc.failure(None, refusal))
            conn.close()
            nursery.cancel_scope.cancel()
    except Exception as exc:  # never let one client take the daemon down
        if not is_disconnect(exc):
            log.exception("unix connection failed")
    finally:
        if guard.close_reason and not guard.close_reason.startswith("idle"):
            log.info("closed %s: %s", conn.id, guard.close_reason)
        conn.close()
        guard.release()
        serving.closed(conn)
        with trio.CancelScope(shield=True):
            try:
                await stream.aclose()
            except Exception:
                pass


async def _read_requests(
    serving: Serving, conn: Connection, stream: trio.SocketStream, guard: Guard, nursery: trio.Nursery
) -> errors.ThrumError | None:
    """Read lines and start a handler for each until EOF or idleness (None) or an error to hang up with."""
    buf = bytearray()
    scanned = 0  # bytes of buf known to hold no newline: a long line is scanned once, not per chunk
    while True:
        with guard.waiting() as waiting:
            try:
                chunk = await stream.receive_some(RECEIVE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
        if waiting.cancelled_caught:
            reason = guard.expired()
            if reason is None:
                continue
            guard.closing(reason)
            return None if reason.startswith("idle") else errors.Timeout(f"connection closed: {reason}")
        if not chunk:
            return None
        buf += chunk
        try:
            guard.received(len(buf))
        except BudgetExceeded as exc:
            return errors.Unavailable(f"connection closed: {exc}")
        while True:
            nl = buf.find(b"\n", scanned)
            if nl < 0:
                scanned = len(buf)
                break
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            scanned = 0
            guard.started(nl + 1)
            if not line.strip():
                guard.finished(nl + 1)
                continue
            ticket = object()
            await guard.in_flight.acquire_on_behalf_of(ticket)  # at the cap: stop reading, the client waits
            nursery.start_soon(_answer, serving, conn, guard, line, nl + 1, ticket)
        guard.received(len(buf))  # only ever shrinks here
        if len(buf) > MAX_LINE:
            return errors.InvalidRequest(f"request too large (over {MAX_LINE} bytes)")


async def _answer(serving: Serving, conn: Connection, guard: Guard, line: bytes, size: int, ticket: object) -> None:
    try:
        answer = await handle_frame(serving.services, conn, line, max_batch=guard.limits.max_batch)
        if answer is not None:
            await _safe_send(conn, answer)
    finally:
        guard.in_flight.release_on_behalf_of(ticket)
        guard.finished(size)


async def _safe_send(conn: Connection, obj: Any) -> None:
    try:
        await conn.send(obj)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        conn.close()

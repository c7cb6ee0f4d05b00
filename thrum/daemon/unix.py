"""Newline-delimited JSON-RPC over the daemon's Unix socket (mode 0600)."""

from __future__ import annotations

import logging
import os
import socket as stdsocket
from functools import partial
from pathlib import Path

import trio

from .. import errors, jsonrpc
from .connection import Connection, is_disconnect
from .dispatch import handle_frame

log = logging.getLogger(__name__)

MAX_LINE = 32 * 1024 * 1024  # a 16 MiB body JSON-escaped still fits


def remove_stale_socket(path: Path) -> None:
    """Remove a socket file nobody listens on (left by a crash). Caller holds the daemon lock."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


async def serve_unix(daemon, path: Path, task_status=trio.TASK_STATUS_IGNORED) -> None:
    remove_stale_socket(path)
    sock = trio.socket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket is born 0600: no window where others can connect
    try:
        await sock.bind(str(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(256)
    listener = trio.SocketListener(sock)
    try:
        task_status.started()
        await trio.serve_listeners(partial(_serve_stream, daemon), [listener])
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


async def _serve_stream(daemon, stream: trio.SocketStream) -> None:
    conn = Connection("unix", stream.send_all, queue_size=daemon.config.ws_queue_size)
    daemon.connections.add(conn)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.run_outbox)
            buf = bytearray()
            while True:
                try:
                    chunk = await stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break
                if not chunk:
                    break
                buf += chunk
                while True:
                    nl = buf.find(b"\n")
                    if nl < 0:
                        break
                    line = bytes(buf[:nl])
                    del buf[:nl + 1]
                    if line.strip():
                        nursery.start_soon(_answer, daemon, conn, line)
                if len(buf) > MAX_LINE:
                    await _safe_send(conn, jsonrpc.failure(None, errors.InvalidRequest(
                        f"request too large (over {MAX_LINE} bytes)")))
                    buf.clear()
                    break
            conn.close()
            nursery.cancel_scope.cancel()
    except Exception as exc:  # never let one client take the daemon down
        if not is_disconnect(exc):
            log.exception("unix connection failed")
    finally:
        conn.close()
        daemon.connections.discard(conn)
        await daemon.connection_closed(conn)
        with trio.CancelScope(shield=True):
            try:
                await stream.aclose()
            except Exception:
                pass


async def _answer(daemon, conn: Connection, line: bytes) -> None:
    answer = await handle_frame(daemon, conn, line)
    if answer is not None:
        await _safe_send(conn, answer)


async def _safe_send(conn: Connection, obj) -> None:
    try:
        await conn.send(obj)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        conn.close()

"""Blocking JSON-RPC 2.0 client for the daemon's Unix socket.

Every front end (CLI, MCP server, Gas City adapter) talks to the daemon through
this module. It is deliberately small and cheap to import: stdlib ``socket`` and
``json`` only, no trio, no pygit2.

Rules:

1. One request object per line out, one response object per line back; lines
   without an ``id`` (notifications) and responses to other ids are skipped.
2. An ``error`` response becomes the typed `thrum.errors` exception rebuilt by
   `from_rpc`; a missing socket or a refused connection becomes `Unavailable`
   with a message that says what to do.
3. It only talks: finding and starting the daemon is `thrum.lifecycle`'s job
   (`lifecycle.connect` returns a `Client`, starting the daemon when needed).
4. Writes that create or change a message (`KEYED_METHODS`) carry an
   ``idempotency_key`` (a fresh random one unless the caller gives its own): the
   daemon answers a repeat of the key with the first result instead of writing
   again. A timeout or a lost connection says whether the write may have
   happened, and for a keyed write which key makes a retry safe
   (``error.data``: ``may_have_written``, ``idempotency_key``).
5. A connection the daemon closed while it sat idle (idle timeout, a restart,
   room made for other clients) is noticed before the next request is sent and
   replaced; a request is never sent twice by this module.
6. An error answer with ``id: null`` is the daemon speaking about the
   connection itself (over the connection cap, a request too large, closed for
   a timeout): it is raised as the answer to the request in progress.
"""

from __future__ import annotations

import errno
import json
import os
import time

# The C module, not `socket`: the wrapper pulls in selectors/enum conversions that
# cost ~2 ms of start-up on every command, and we need none of it.
import _socket

from .errors import ThrumError, Timeout, Unavailable, from_rpc

DEFAULT_TIMEOUT = 60.0
_RECV = 256 * 1024

# Writes the daemon deduplicates by ``idempotency_key``.
KEYED_METHODS = frozenset({"message.send", "message.edit"})
# Calls that change nothing: a timeout on these never leaves a write behind.
READ_METHODS = frozenset(
    {
        "health",
        "daemon.status",
        "agent.list",
        "agent.get",
        "session.list",
        "message.list",
        "message.get",
        "message.sent",
        "message.thread",
        "message.counts",
        "message.wait",
        "group.list",
        "group.info",
        "group.members",
        "sync.status",
        "subscribe.list",
    }
)


def new_idempotency_key() -> str:
    """A random key for one logical write (retries of it reuse the key)."""
    return "k_" + os.urandom(16).hex()


def with_idempotency_key(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """``params`` with an ``idempotency_key`` added when ``method`` takes one and none is given.

    Shared with the async client so every front end sends one.
    """
    params = dict(params or {})
    if method in KEYED_METHODS and not params.get("idempotency_key"):
        params["idempotency_key"] = new_idempotency_key()
    return params


def _unanswered(method: str, params: dict[str, Any], what: str, error_cls: type[ThrumError]) -> ThrumError:
    """The error for a request whose answer never came: did it write, and how to retry safely."""
    key = params.get("idempotency_key") if method in KEYED_METHODS else None
    if method in READ_METHODS:
        return error_cls(f"{what}; nothing was changed", data={"may_have_written": False})
    if key:
        return error_cls(
            f"{what}; it may still have been stored: retrying with the same idempotency_key "
            f"({key}) cannot store it twice",
            data={"may_have_written": True, "idempotency_key": key},
        )
    return error_cls(
        f"{what}; it may still have taken effect (check before repeating it)", data={"may_have_written": True}
    )


TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs start-up time
if TYPE_CHECKING:
    from typing import Any, Callable

    from .paths import ThrumPaths

    Trace = Callable[[str], None]
else:
    Trace = "Callable[[str], None]"  # annotations only (the Gas City provider starts without typing)


def _not_running(path: str, why: str) -> Unavailable:
    return Unavailable(f"thrum daemon is not running ({why} {path}); start it with `thrum daemon start`")


class Client:
    """One connection to the daemon; `call` sends a request and waits for its answer.

    Usable as a context manager; reconnects lazily on the next call after `close`.
    """

    def __init__(
        self,
        paths: ThrumPaths | None = None,
        *,
        socket_path: str | os.PathLike[str] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        trace: Trace | None = None,
    ) -> None:
        if socket_path is None:
            if paths is None:
                raise TypeError("Client needs paths or socket_path")
            socket_path = paths.socket
        self.socket_path = os.fspath(socket_path)
        self.timeout = timeout
        self._trace = trace
        self._sock: _socket.socket | None = None
        self._buf = bytearray()
        self._next_id = 0

    # ------------------------------------------------------------------ connection

    def connect(self) -> "Client":
        """Open the connection (no-op when open).

        Raises:
            Unavailable: no socket, connection refused, or no permission.
        """
        if self._sock is not None:
            return self
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except FileNotFoundError:
            sock.close()
            raise _not_running(self.socket_path, "no socket at") from None
        except ConnectionRefusedError:
            sock.close()
            raise _not_running(self.socket_path, "nothing listening on") from None
        except PermissionError:
            sock.close()
            raise Unavailable(
                f"permission denied on the thrum socket {self.socket_path}; the daemon belongs to another user"
            ) from None
        except TimeoutError:
            sock.close()
            raise Unavailable(
                f"thrum daemon did not accept a connection on {self.socket_path} within {self.timeout:g}s"
            ) from None
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.ENOTSOCK, errno.ECONNREFUSED, errno.ENOENT):
                raise _not_running(self.socket_path, "no daemon at") from None
            raise Unavailable(
                f"cannot connect to the thrum daemon at {self.socket_path}: {exc.strerror or exc}"
            ) from None
        self._sock = sock
        self._buf.clear()
        return self

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._buf.clear()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ calls

    def call(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        """Send one request and return its ``result``.

        ``timeout`` (seconds) overrides the client's for this call (long polls).

        Raises:
            ThrumError: the typed error of an error response.
            Unavailable: the daemon cannot be reached or hung up.
            Timeout: no answer in time.
        """
        self._drop_if_closed()
        sock = self.connect()._sock
        assert sock is not None  # connect() raised otherwise
        self._next_id += 1
        req_id = self._next_id
        params = with_idempotency_key(method, params)
        request = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}
        data = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        started = time.monotonic()
        if self._trace:
            self._trace(f"→ {method} {_short(request['params'])}")
        if timeout is not None:
            sock.settimeout(timeout)
        try:
            sock.sendall(data)
            msg = self._answer_to(req_id, sock)
        except TimeoutError:
            self.close()
            limit = timeout if timeout is not None else self.timeout
            raise _unanswered(
                method, params, f"thrum daemon did not answer {method} within {limit:g}s", Timeout
            ) from None
        except (BrokenPipeError, ConnectionResetError):
            self.close()
            raise _unanswered(
                method,
                params,
                f"thrum daemon closed the connection during {method} (check `thrum daemon status`)",
                Unavailable,
            ) from None
        except OSError as exc:
            self.close()
            raise _unanswered(
                method,
                params,
                f"lost the connection to the thrum daemon during {method}: {exc.strerror or exc}",
                Unavailable,
            ) from None
        finally:
            if timeout is not None and self._sock is not None:
                self._sock.settimeout(self.timeout)
        if self._trace:
            took = (time.monotonic() - started) * 1000
            status = "error" if "error" in msg else "ok"
            self._trace(f"← {method} {status} in {took:.1f} ms")
        if "error" in msg and msg["error"] is not None:
            raise from_rpc(msg["error"])
        if "result" not in msg:
            raise ThrumError(f"thrum daemon answered {method} with neither result nor error")
        return msg["result"]

    def _answer_to(self, req_id: int, sock: _socket.socket) -> dict[str, Any]:
        """The answer to request ``req_id`` (notifications and others' answers are skipped), or
        the daemon's last word about the connection itself (an id-null error; it hangs up after it)."""
        while True:
            line = self._read_line(sock)
            try:
                msg = json.loads(line)
            except ValueError:
                raise ThrumError(f"thrum daemon sent a malformed response: {line[:80]!r}") from None
            if not isinstance(msg, dict):
                continue
            if msg.get("id") is None and isinstance(msg.get("error"), dict):
                self.close()
                return msg
            if msg.get("id") == req_id:
                return msg

    def _drop_if_closed(self) -> None:
        """Forget a connection the daemon has closed since our last call (nothing was pending on it)."""
        sock = self._sock
        if sock is None:
            return
        sock.settimeout(0)  # a timeout would make Python wait for data first
        try:
            data = sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return  # open, nothing to read: the usual case
        except OSError:
            self.close()
            return
        finally:
            if self._sock is not None:
                self._sock.settimeout(self.timeout)
        if not data:
            self.close()
            return
        # Unread notifications, or the daemon's last word before closing (an id-null
        # error): the latter means the connection is gone.
        self._buf += data
        if b'"id":null' in self._buf and b'"error"' in self._buf:
            self.close()

    def _read_line(self, sock: _socket.socket) -> bytes:
        buf = self._buf
        while True:
            nl = buf.find(b"\n")
            if nl >= 0:
                line = bytes(buf[:nl])
                del buf[: nl + 1]
                if line.strip():
                    return line
                continue
            chunk = sock.recv(_RECV)
            if not chunk:
                self.close()
                raise ConnectionResetError("EOF")
            buf += chunk


def _short(params: Any, limit: int = 200) -> str:
    text = json.dumps(params, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"

"""The Web UI inside the daemon: a daemon plugin (`thrum.daemon.plugins`) with the access
rules, their state file, and the HTTP listener.

The daemon makes one `WebUi` from its ``.thrum/var`` directory and the configured port,
lets its WebSocket admit the UI's page (``browser``), and starts it once the WebSocket
listens (`WebUi.start`, with the nursery, the connection registry and the WebSocket's
port); the ``ui.open`` and ``ui.signout`` RPC methods (thrum/daemon/service/ui.py) call
`WebUi.open` and `WebUi.sign_out`. Nothing here imports the daemon.

Rules:

1. No listener until someone asks: the first ``ui.open`` starts one on
   127.0.0.1 — on ``port`` when given (taken: a clear error), else on the
   configured ``ui_port`` (9998) when free, else on any free port. Later calls
   reuse it; a call naming another port moves it there (the old listener
   closes once the new one is up).
2. Every ``ui.open`` answers a fresh one-time login URL. The daemon's WebSocket
   admits the page through the same `UiAccess` (its cookie, its page key and
   the UI's Origin).
3. The secret, the UI's port and the time of the last login are kept in
   ``.thrum/var/ui.session`` (mode 0600, replaced atomically). A daemon that
   starts while a session may still be valid (a login within `SESSION_TTL`)
   listens on the same port again at once, with the same secret: an open page
   reconnects by itself after ``thrum daemon restart``. ``ui.signout`` rotates
   the secret (every session ends), closes the listener and removes the file.
4. With ``handover``, ``ui.open`` also writes the login URL into a page of its
   own under ``.thrum/var/ui-open/`` (directory 0700, file 0600) that redirects
   the browser to it: ``thrum ui --open`` hands the browser that file's path,
   so the code never appears on a command line (which every local user can
   read). The file goes when its code is used or expires.
5. The listener runs in the daemon's nursery and stops with the daemon. Its
   connections are admitted by the daemon's connection registry, under the
   same cap and timeouts as the Unix socket and the WebSocket (`thrum.ui.http`).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import secrets
import stat
import time
from pathlib import Path
from typing import Any, Protocol

import trio

from .. import __version__, errors
from . import http
from .access import CODE_TTL, UiAccess
from .app import StaticFile, UiApp, load_static

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
DEFAULT_PORT = 9998
STATE_FILE = "ui.session"
HANDOVER_DIR = "ui-open"


class Host(Protocol):
    """What the daemon gives a started plugin (`thrum.daemon.plugins.PluginHost`)."""

    @property
    def nursery(self) -> trio.Nursery: ...

    @property
    def registry(self) -> Any: ...  # thrum.daemon.limits.Registry: admits the listener's connections

    @property
    def ws_port(self) -> int: ...


class WebUi:
    """One per daemon: the access rules (made at start) and the listener (made on demand)."""

    name = "ui"

    def __init__(self, var: Path, preferred_port: int = DEFAULT_PORT):
        self._var = Path(var)
        self._preferred = preferred_port
        self._state = _load_state(self._var / STATE_FILE)
        self.access = UiAccess(self._state.get("secret"))
        self.port: int | None = None
        self._host: Host | None = None  # set by `start`
        self._scope: trio.CancelScope | None = None
        self._lock = trio.Lock()
        self._static: dict[str, StaticFile] | None = None
        self._handovers: dict[str, Path] = {}  # login code -> its hand-over file

    @property
    def browser(self) -> UiAccess:
        """The page the daemon's WebSocket admits (its origins, cookie and page key)."""
        return self.access

    async def start(self, host: Host) -> None:
        """The daemon's WebSocket listens: the UI may listen too (`resume`, then on ``ui.open``)."""
        self._host = host
        await self.resume()

    def _started(self) -> Host:
        if self._host is None:
            raise errors.Unavailable("the Web UI is still starting; retry in a moment")
        return self._host

    # ------------------------------------------------------------------ the RPC side

    async def resume(self) -> None:
        """At daemon start: listen again where the last session's page expects us, if it may be live."""
        _clear_handovers(self._var / HANDOVER_DIR)
        port = self._state.get("port")
        last = self._state.get("last_login") or 0
        if not isinstance(port, int) or not 0 < port < 65536 or time.time() > last + self.access.session_ttl:
            return
        try:
            async with self._lock:
                await self._listen(port)
        except errors.ThrumError as exc:
            log.warning("the Web UI cannot listen on port %d again (%s); `thrum ui` opens it elsewhere", port, exc)

    async def open(self, port: int | None, *, handover: bool = False) -> dict[str, Any]:
        """Start (or move) the listener if needed; a login URL for one browser."""
        host = self._started()
        async with self._lock:
            if self.port is None or (port is not None and port != 0 and port != self.port):
                await self._listen(port)
            login = self.access.new_login()
            self._state = {"secret": self.access.secret, "port": self.port, "last_login": int(time.time())}
            await trio.to_thread.run_sync(_write_state, self._var / STATE_FILE, self._state)
        url = f"http://{HOST}:{self.port}/login?code={login.code}#key={login.key}"
        result: dict[str, Any] = {"url": url, "port": self.port, "ws_port": host.ws_port, "expires_in": int(CODE_TTL)}
        if handover:
            path = await trio.to_thread.run_sync(_write_handover, self._var / HANDOVER_DIR, url)
            self._handovers[login.code] = path
            host.nursery.start_soon(self._forget_handover_later, login.code)
            result["handover_file"] = str(path)
        return result

    async def sign_out(self) -> dict[str, Any]:
        """End every browser session (a new secret), stop listening, forget the state file."""
        async with self._lock:
            self.access.rotate()
            was = self.port
            if self._scope is not None:
                self._scope.cancel()
            self._scope = None
            self.port = None
            self.access.listening_on(None)
            self._state = {}
            await trio.to_thread.run_sync(_remove, self._var / STATE_FILE)
            for code in list(self._handovers):
                self._forget_handover(code)
        return {"signed_out": True, "port": was}

    # ------------------------------------------------------------------ hand-over files

    def _forget_handover(self, code: str) -> None:
        path = self._handovers.pop(code, None)
        if path is not None:
            _remove(path)

    async def _forget_handover_later(self, code: str) -> None:
        await trio.sleep(CODE_TTL)
        self._forget_handover(code)

    # ------------------------------------------------------------------ the listener

    async def _listen(self, port: int | None) -> None:
        host = self._started()
        listeners = await _open_listeners(port, self._preferred)
        new_port: int = listeners[0].socket.getsockname()[1]
        if self._static is None:
            self._static = await trio.to_thread.run_sync(load_static)
        old = self._scope
        self._scope = trio.CancelScope()
        self.access.listening_on(new_port)
        app = UiApp(
            self.access,
            ws_port=host.ws_port,
            version=__version__,
            static=self._static,
            on_login=self._forget_handover,
        )
        await host.nursery.start(self._serve, app, listeners, self._scope, host.registry)
        self.port = new_port
        if old is not None:
            old.cancel()
        log.info("Web UI listening on http://%s:%d/", HOST, new_port)

    @staticmethod
    async def _serve(
        app: UiApp,
        listeners: list[trio.SocketListener],
        scope: trio.CancelScope,
        registry: Any,
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with scope:
            await http.serve(app.handle, listeners, registry, task_status=task_status)


# ---------------------------------------------------------------------------- files


def _load_state(path: Path) -> dict[str, Any]:
    """The state file's content, or {} when it is missing, unreadable, not ours or not private."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            log.warning("ignoring %s: not private to this user (mode %o)", path, st.st_mode & 0o777)
            return {}
        data = json.loads(os.read(fd, 64 * 1024).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    if not isinstance(data, dict) or not isinstance(data.get("secret"), str) or len(data["secret"]) < 32:
        return {}
    return data


def _write_state(path: Path, state: dict[str, Any]) -> None:
    _write_private(path, json.dumps(state).encode("utf-8"))


def _write_private(path: Path, data: bytes) -> None:
    """``data`` in ``path``: mode 0600 from birth, replaced atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _write_handover(folder: Path, url: str) -> Path:
    """A page (0600, in a 0700 directory) that sends the browser on to ``url``."""
    folder.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise errors.ThrumError(f"{folder} is not a directory of this user's; remove it and retry")
    os.chmod(folder, 0o700)
    path = folder / f"login-{secrets.token_hex(8)}.html"
    body = (
        '<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
        f'<meta http-equiv="refresh" content="0;url={url}"><title>thrum</title>'
        f'<p>Opening thrum… <a href="{url}">continue</a></p>\n'
    )
    _write_private(path, body.encode("utf-8"))
    return path


def _clear_handovers(folder: Path) -> None:
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith("login-") and name.endswith(".html"):
            _remove(folder / name)


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# ---------------------------------------------------------------------------- ports


def preferred_port(config_values: dict[str, Any]) -> int:
    """The configured ``ui_port`` (default 9998; 0: any free port)."""
    value = config_values.get("ui_port", DEFAULT_PORT)
    return int(value) if value is not None else DEFAULT_PORT


async def _open_listeners(port: int | None, preferred: int) -> list[trio.SocketListener]:
    """Listeners on ``port`` (exactly; 0 = any), else on ``preferred`` or any free port.

    Raises:
        Conflict: the requested port is taken.
        ThrumError: it cannot be used (e.g. a privileged port).
    """
    if port is not None:
        try:
            return await trio.open_tcp_listeners(port, host=HOST)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise errors.Conflict(
                    f"port {port} is already in use; choose another with --port, or leave it out for a free one"
                ) from None
            raise errors.ThrumError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    if preferred:
        try:
            return await trio.open_tcp_listeners(preferred, host=HOST)
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise
            log.info("Web UI port %d is taken (%s); using a free port instead", preferred, exc.strerror)
    return await trio.open_tcp_listeners(0, host=HOST)

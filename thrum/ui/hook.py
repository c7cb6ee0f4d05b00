"""The Web UI inside the daemon: the access rules and the HTTP listener ``ui.open`` starts.

The daemon holds one `WebUi` (``install``); the ``ui.open`` RPC method
(thrum/daemon/service/ui.py) calls `WebUi.open`. Nothing here imports the daemon:
it is handed the daemon object and uses its nursery, config and WebSocket port.

Rules:

1. No listener until someone asks: the first ``ui.open`` starts one on
   127.0.0.1 — on ``port`` when given (taken: a clear error), else on the
   configured ``ui_port`` (9998) when free, else on any free port. Later calls
   reuse it; a call naming another port moves it there (the old listener
   closes once the new one is up).
2. Every ``ui.open`` answers a fresh one-time login URL. The daemon's WebSocket
   admits the page through the same `UiAccess` (cookie + the UI's Origin).
3. The listener runs in the daemon's nursery and stops with the daemon.
"""

from __future__ import annotations

import errno
import logging

import trio

from .. import __version__, errors
from . import http
from .access import CODE_TTL, UiAccess
from .app import UiApp, load_static

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
DEFAULT_PORT = 9998


class WebUi:
    """One per daemon: the access rules (made at start) and the listener (made on demand)."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.access = UiAccess()
        self.port: int | None = None
        self._scope: trio.CancelScope | None = None
        self._lock = trio.Lock()
        self._static = None

    async def open(self, port: int | None) -> dict:
        """Start (or move) the listener if needed; a login URL for one browser."""
        async with self._lock:
            if self.port is None or (port is not None and port != 0 and port != self.port):
                await self._listen(port)
        code = self.access.new_code()
        return {
            "url": f"http://{HOST}:{self.port}/login?code={code}",
            "port": self.port,
            "ws_port": self.daemon.ws_port,
            "expires_in": int(CODE_TTL),
        }

    async def _listen(self, port: int | None) -> None:
        listeners = await _open_listeners(port, _preferred(self.daemon))
        new_port = listeners[0].socket.getsockname()[1]
        if self._static is None:
            self._static = await trio.to_thread.run_sync(load_static)
        old = self._scope
        self._scope = trio.CancelScope()
        self.access.port = new_port
        app = UiApp(self.access, ws_port=self.daemon.ws_port, version=__version__, static=self._static)
        await self.daemon.nursery.start(self._serve, app, listeners, self._scope)
        self.port = new_port
        if old is not None:
            old.cancel()
        log.info("Web UI listening on http://%s:%d/", HOST, new_port)

    @staticmethod
    async def _serve(
        app: UiApp, listeners: list, scope: trio.CancelScope, task_status=trio.TASK_STATUS_IGNORED
    ) -> None:
        with scope:
            await http.serve(app.handle, listeners, task_status=task_status)


def _preferred(daemon) -> int:
    value = daemon.config.values.get("ui_port", DEFAULT_PORT)
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


def install(daemon) -> WebUi:
    """Create the daemon's `WebUi` (``daemon.web_ui``); the listener waits for ``ui.open``."""
    daemon.web_ui = WebUi(daemon)
    return daemon.web_ui

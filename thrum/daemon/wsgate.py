"""Who may open the daemon's WebSocket: the handshake's checks (thrum.daemon.ws listens).

Rules:

1. Token: a fresh random token at every daemon start in ``.thrum/var/ws.token``
   (born 0600, replaced atomically, written before the port file). A client
   presents it as ``Authorization: Bearer <token>`` or as the ``token`` query
   parameter; anything else is refused with 401.
2. Origin: any web page can open a socket to localhost, so a request carrying a
   browser ``Origin`` other than this daemon's own (``http://127.0.0.1:<port>``,
   ``http://localhost:<port>``) or its Web UI's is refused with 403, token or not.
   Clients that send no Origin (CLIs, scripts, agents) are not browsers and pass
   this check. A request from the Web UI's origin is admitted only with both
   halves of a UI session (``browser.admits``, thrum.ui.access): its cookie and
   the page key, offered as the subprotocol ``thrum-key.<K>`` (answered with
   ``thrum``); never by token. Such a connection is an observer: nothing it does
   marks an agent as seen (docs/design/ui.md, "Presence").
3. Every refusal is answered with a one-line plain-text body saying why (the
   listener logs it with the peer and reason, never with the token).
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

HOST = "127.0.0.1"
PATH = "/ws"


class BrowserAccess(Protocol):
    """The Web UI's page as the WebSocket admits it (`thrum.ui.access.UiAccess`)."""

    @property
    def origins(self) -> frozenset[str]: ...

    @property
    def protocol(self) -> str: ...

    def key_in(self, protocols: Iterable[str]) -> str | None: ...

    def admits(self, cookie_header: str | None, key: str | None) -> bool: ...


BROWSER = "browser"  # Gate.check's verdict for the Web UI's page
CLIENT = "client"  # ... for a client with the token


class Gate:
    """The handshake checks: path, Origin, token (or the Web UI's session). Pure apart from the logger."""

    def __init__(self, token: str, port: int, browser: BrowserAccess | None = None):
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
        origin = header(headers, b"origin")
        if origin is not None and self.browser is not None and origin.rstrip("/").lower() in self.browser.origins:
            key = self.browser.key_in(protocols)
            if self.browser.admits(header(headers, b"cookie"), key):
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
        auth = header(headers, b"authorization")
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


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None

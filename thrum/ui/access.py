"""Who may use the Web UI: a per-start secret, one-time login codes, Origin and Host rules.

Pure (no I/O): the daemon holds one `UiAccess` from start to stop.

Rules:

1. The secret is random, made when the daemon starts and kept in memory only
   (never written to disk, never sent to anything but the browser that logs in).
   A daemon restart makes every browser session invalid.
2. ``thrum ui`` asks the daemon for a login code: random, single use, valid for
   `CODE_TTL` seconds. Opening ``/login?code=…`` redeems it and answers with the
   cookie that carries the secret: ``HttpOnly`` (page scripts cannot read it),
   ``SameSite=Strict`` (other sites' requests do not carry it), ``Path=/``, no
   expiry (it dies with the browser session, and with the daemon).
3. Cookies ignore ports, so the cookie is named after the UI's port
   (``thrum_ui_<port>``): two repositories' UIs on one machine do not clobber
   each other's sessions.
4. A browser request is the UI's own only if its ``Origin`` is exactly
   ``http://127.0.0.1:<port>`` or ``http://localhost:<port>``; the same two are the
   only accepted ``Host`` values (a DNS-rebound name is refused).
"""

from __future__ import annotations

import hmac
import secrets
import time
from typing import Callable

CODE_TTL = 300.0  # seconds a login code stays valid
MAX_CODES = 64  # unredeemed codes kept (the oldest are forgotten first)
HOSTS = ("127.0.0.1", "localhost")


class UiAccess:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic):
        self._secret = secrets.token_urlsafe(32)
        self._codes: dict[str, float] = {}  # code -> expiry (clock time)
        self._clock = clock
        self.port: int | None = None

    # ------------------------------------------------------------------ where

    @property
    def origins(self) -> frozenset[str]:
        """The UI page's own origins (empty until the UI listens)."""
        if self.port is None:
            return frozenset()
        return frozenset(f"http://{h}:{self.port}" for h in HOSTS)

    def host_ok(self, host: str | None) -> bool:
        """Is ``host`` (a request's Host header) this UI's own host and port?"""
        if host is None or self.port is None:
            return False
        return host.strip().lower() in {f"{h}:{self.port}" for h in HOSTS}

    # ------------------------------------------------------------------ login codes

    def new_code(self) -> str:
        now = self._clock()
        self._codes = {c: t for c, t in self._codes.items() if t > now}
        while len(self._codes) >= MAX_CODES:
            self._codes.pop(next(iter(self._codes)))
        code = secrets.token_urlsafe(24)
        self._codes[code] = now + CODE_TTL
        return code

    def redeem(self, code: str | None) -> bool:
        """True once for a valid, unexpired code; it is gone afterwards."""
        if not code:
            return False
        expiry = self._codes.pop(code, None)
        return expiry is not None and expiry > self._clock()

    # ------------------------------------------------------------------ the cookie

    @property
    def cookie_name(self) -> str:
        return f"thrum_ui_{self.port}"

    def set_cookie(self) -> str:
        """The ``Set-Cookie`` header value that logs a browser in."""
        return f"{self.cookie_name}={self._secret}; HttpOnly; SameSite=Strict; Path=/"

    def admits(self, cookie_header: str | None) -> bool:
        """Does this ``Cookie`` header carry the UI secret (under this UI's cookie name)?"""
        if not cookie_header or self.port is None:
            return False
        want = self._secret.encode()
        ok = False
        for part in cookie_header.split(";"):
            name, sep, value = part.strip().partition("=")
            if sep and name == self.cookie_name:
                ok |= hmac.compare_digest(value.strip().encode("utf-8", "surrogateescape"), want)
        return ok

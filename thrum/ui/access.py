"""Who may use the Web UI: a secret, one-time login codes, sessions of two halves, Origin and Host.

Pure (no I/O): the daemon holds one `UiAccess` from start to stop; `thrum.ui.hook`
loads and stores its secret.

Rules:

1. The secret is random, kept in ``.thrum/var/ui.session`` (mode 0600, written by
   the hook) so that an open page survives a daemon restart. Nothing derived from
   it is ever written anywhere else. Rotating it (``thrum ui --sign-out``) ends
   every session at once.
2. ``thrum ui`` asks for a login: a random, single-use code valid for `CODE_TTL`
   seconds, and a new session id S. The URL is ``/login?code=C#key=S.K``: the
   code goes to the server once; the page key K (``HMAC(secret, "page" + S)``)
   stays in the fragment, which browsers never send anywhere.
3. Redeeming the code sets the cookie ``thrum_ui_<port>_<tag>=S.<HMAC(secret,
   "cookie" + S)>`` (the tag: from S, so that a second login, in another tab,
   does not overwrite the first's): ``HttpOnly``, ``SameSite=Strict``,
   ``Path=/``, no expiry attribute. The page moves ``S.K`` from its address to
   ``sessionStorage`` and offers it in every WebSocket handshake; the daemon
   admits the page only with BOTH halves of the same session (`admits`).
4. Why two halves: cookies ignore ports, so every other server on 127.0.0.1 that
   the browser visits receives the cookie. Alone it opens nothing (only the
   page's HTML, which holds no data). K never leaves the page's origin: no
   request carries it automatically, and other origins cannot read the page's
   storage.
5. A session ends `SESSION_TTL` seconds after its login (wall clock: the time
   is in the session id, under the MAC), when the secret is rotated, or when
   the tab that holds K closes.
6. A browser request is the UI's own only if its ``Origin`` is exactly
   ``http://127.0.0.1:<port>`` or ``http://localhost:<port>``; the same two are the
   only accepted ``Host`` values (a DNS-rebound name is refused).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Callable, Iterable

CODE_TTL = 300.0  # seconds a login code stays valid
SESSION_TTL = 7 * 24 * 3600.0  # seconds a browser session lasts after its login
MAX_CODES = 64  # unredeemed codes kept (the oldest are forgotten first)
HOSTS = ("127.0.0.1", "localhost")
KEY_PROTOCOL = "thrum-key."  # Sec-WebSocket-Protocol entry carrying the page key
PROTOCOL = "thrum"  # the subprotocol the daemon answers with


def new_secret() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Login:
    code: str
    session: str
    key: str  # "S.K": what the page keeps (the URL's fragment)


class UiAccess:
    """The access rules of one daemon's Web UI (see the module's rules)."""

    def __init__(
        self,
        secret: str | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        session_ttl: float = SESSION_TTL,
    ):
        self._secret = (secret or new_secret()).encode("ascii")
        self._codes: dict[str, tuple[float, str]] = {}  # code -> (expiry on `clock`, session id)
        self._clock = clock
        self._wall = wall
        self.session_ttl = session_ttl
        self.port: int | None = None

    protocol = PROTOCOL  # the WebSocket subprotocol the daemon answers the page with

    @property
    def secret(self) -> str:
        return self._secret.decode("ascii")

    def rotate(self) -> str:
        """A new secret: every session and unredeemed code ends now. Returns it (to store)."""
        self._secret = new_secret().encode("ascii")
        self._codes.clear()
        return self.secret

    # ------------------------------------------------------------------ where

    def listening_on(self, port: int | None) -> None:
        """The UI's listener moved to ``port`` (None: it stopped): its origins and cookies follow."""
        self.port = port

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

    def new_login(self) -> Login:
        """A one-time code for a new session, and that session's page key."""
        now = self._clock()
        self._codes = {c: v for c, v in self._codes.items() if v[0] > now}
        while len(self._codes) >= MAX_CODES:
            self._codes.pop(next(iter(self._codes)))
        session = f"{int(self._wall())}-{secrets.token_urlsafe(18)}"
        code = secrets.token_urlsafe(24)
        self._codes[code] = (now + CODE_TTL, session)
        return Login(code, session, f"{session}.{self._mac('page', session)}")

    def redeem(self, code: str | None) -> str | None:
        """The session of a valid, unexpired code, once; the code is gone afterwards."""
        if not code:
            return None
        entry = self._codes.pop(code, None)
        if entry is None or entry[0] <= self._clock():
            return None
        return entry[1]

    # ------------------------------------------------------------------ the two halves

    @property
    def cookie_prefix(self) -> str:
        return f"thrum_ui_{self.port}_"

    def cookie_name(self, session: str) -> str:
        return self.cookie_prefix + session.partition("-")[2][:10]

    def set_cookie(self, session: str) -> str:
        """The ``Set-Cookie`` header value that carries ``session``'s cookie half."""
        value = f"{session}.{self._mac('cookie', session)}"
        return f"{self.cookie_name(session)}={value}; HttpOnly; SameSite=Strict; Path=/"

    def sessions_in(self, cookie_header: str | None) -> tuple[list[str], list[str]]:
        """(live sessions, names of this UI's cookies that are not) in a ``Cookie`` header."""
        live: list[str] = []
        dead: list[str] = []
        if not cookie_header or self.port is None:
            return live, dead
        for part in cookie_header.split(";"):
            name, sep, value = part.strip().partition("=")
            if not sep or not name.startswith(self.cookie_prefix):
                continue
            session, dot, mac = value.strip().rpartition(".")
            ok = bool(dot and session) and name == self.cookie_name(session)
            if ok and self._check("cookie", session, mac) and self._live(session):
                live.append(session)
            else:
                dead.append(name)
        return live, dead

    def signed_in(self, cookie_header: str | None, session: str | None = None) -> bool:
        """The header carries a live session's cookie half (``session``'s, when given)."""
        live, _ = self.sessions_in(cookie_header)
        return session in live if session else bool(live)

    def expire_cookie(self, name: str) -> str:
        return f"{name}=; Max-Age=0; HttpOnly; SameSite=Strict; Path=/"

    @staticmethod
    def key_in(protocols: Iterable[str]) -> str | None:
        """The page key ``S.K`` among a handshake's proposed subprotocols (``thrum-key.S.K``), or None."""
        for item in protocols:
            item = item.strip()
            if item.startswith(KEY_PROTOCOL) and len(item) > len(KEY_PROTOCOL):
                return item[len(KEY_PROTOCOL) :]
        return None

    def admits(self, cookie_header: str | None, key: str | None) -> bool:
        """Both halves of one live session: its cookie and its page key ``S.K``."""
        if not key:
            return False
        session, dot, mac = key.rpartition(".")
        if not dot or not self._check("page", session, mac):
            return False
        return self.signed_in(cookie_header, session)

    # ------------------------------------------------------------------ helpers

    def _mac(self, purpose: str, session: str) -> str:
        digest = hmac.new(self._secret, f"{purpose}\0{session}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def _check(self, purpose: str, session: str, mac: str) -> bool:
        want = self._mac(purpose, session).encode("ascii")
        return hmac.compare_digest(mac.encode("utf-8", "surrogateescape"), want)

    def _live(self, session: str) -> bool:
        issued, _, _ = session.partition("-")
        try:
            at = int(issued)
        except ValueError:
            return False
        return at <= self._wall() + 300 and self._wall() < at + self.session_ttl

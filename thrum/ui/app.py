"""The Web UI's HTTP routes: the page, its static files, login, and a session probe.

Everything the page does after loading goes over the daemon's WebSocket; this
side only hands out files and the login cookie. Pure apart from reading the
static files once.

Routes (GET and HEAD only; anything else is 405):

- ``/login?code=C`` redeems the one-time code: 303 to ``/`` with the session's
  cookie (the page key stays in the URL's fragment, which the redirect keeps);
  cookies of this UI that are no longer valid are deleted on the way. A used or
  expired code is 403 (for a browser that is already signed in, just the
  redirect).
- ``/`` is the page when signed in (a valid cookie: the page holds no data, the
  WebSocket needs the page key too), else a 401 page saying to run ``thrum ui``.
- ``/static/…`` are the page's CSS, JavaScript and images (public: nothing secret).
- ``/api/session?s=S`` answers ``{"authenticated", "ws_port", "version"}``
  (authenticated: the cookie of session S is here and valid): the page asks
  when its WebSocket is refused or drops, to tell "signed out" from "daemon
  away" and to find the daemon's WebSocket port after a restart.

Every answer first checks ``Host`` (`UiAccess.host_ok`: a DNS-rebound name gets
421) and carries headers that keep it out of frames and other origins' reach:
a strict Content-Security-Policy, ``X-Frame-Options: DENY``,
``Referrer-Policy: no-referrer``, ``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Callable

from .access import HOSTS, UiAccess
from .http import Request, Response

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
}


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    content_type: str
    etag: str


def load_static() -> dict[str, StaticFile]:
    """Every file under ``thrum/ui/static`` by its path relative to it (read once, at UI start)."""
    root = resources.files("thrum.ui") / "static"
    out: dict[str, StaticFile] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            name = prefix + child.name
            if child.is_dir():
                walk(child, name + "/")
                continue
            suffix = "." + child.name.rpartition(".")[2]
            if suffix in TYPES:
                body = child.read_bytes()
                out[name] = StaticFile(body, TYPES[suffix], '"' + hashlib.sha256(body).hexdigest()[:20] + '"')

    walk(root, "")
    return out


class UiApp:
    """``handle(Request) -> Response`` for one UI listener."""

    def __init__(
        self,
        access: UiAccess,
        *,
        ws_port: int,
        version: str,
        static: dict[str, StaticFile] | None = None,
        on_login: Callable[[str], None] | None = None,
    ):
        self.access = access
        self.on_login = on_login  # told the code of each login (the hook removes its hand-over file)
        self.ws_port = ws_port
        self.version = version
        self.static = load_static() if static is None else static
        index = self.static["index.html"].body.decode("utf-8")
        self._index = index.replace("{{WS_PORT}}", str(ws_port)).encode("utf-8")

    # ------------------------------------------------------------------ headers

    def _security_headers(self) -> list[tuple[str, str]]:
        ws = " ".join(f"ws://{h}:{self.ws_port}" for h in HOSTS)
        csp = (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            f"connect-src 'self' {ws}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        return [
            ("Content-Security-Policy", csp),
            ("X-Frame-Options", "DENY"),
            ("Referrer-Policy", "no-referrer"),
            ("X-Content-Type-Options", "nosniff"),
            ("Cross-Origin-Resource-Policy", "same-origin"),
            ("Cross-Origin-Opener-Policy", "same-origin"),
        ]

    def _page(self, status: int, title: str, text: str, extra: list[tuple[str, str]] | None = None) -> Response:
        body = (
            f"<!doctype html><meta charset=utf-8><title>thrum: {_esc(title)}</title>"
            f"<link rel=stylesheet href=/static/app.css><main class=notice><h1>{_esc(title)}</h1>"
            f"<p>{_esc(text)}</p></main>\n"
        ).encode("utf-8")
        return Response(
            status, body, headers=[("Cache-Control", "no-store"), *(extra or [])], content_type=TYPES[".html"]
        )

    # ------------------------------------------------------------------ routes

    def handle(self, req: Request) -> Response:
        resp = self._route(req)
        resp.headers = self._security_headers() + resp.headers
        return resp

    def _route(self, req: Request) -> Response:
        if not self.access.host_ok(req.header("host")):
            return Response(
                421,
                b"wrong Host: open the UI at the 127.0.0.1 URL that `thrum ui` prints\n",
                headers=[("Connection", "close")],
            )
        if req.method not in ("GET", "HEAD"):
            return Response(
                405, b"method not allowed: the UI changes nothing over HTTP\n", headers=[("Allow", "GET, HEAD")]
            )
        path = req.path
        logged_in = self.access.signed_in(req.header("cookie"))
        if path == "/login":
            return self._login(req, logged_in)
        if path in ("/", "/index.html"):
            if not logged_in:
                return self._page(
                    401,
                    "not signed in",
                    "Run `thrum ui` in the repository and open the URL it prints "
                    "(the link works once; the daemon forgets sessions when it restarts).",
                )
            return Response(200, self._index, headers=[("Cache-Control", "no-store")], content_type=TYPES[".html"])
        if path == "/api/session":
            session = req.query("s")
            valid = self.access.signed_in(req.header("cookie"), session) if session else logged_in
            body = json.dumps({"authenticated": valid, "ws_port": self.ws_port, "version": self.version})
            return Response(
                200, body.encode(), headers=[("Cache-Control", "no-store")], content_type="application/json"
            )
        if path.startswith("/static/"):
            return self._static(req, path[len("/static/") :])
        if path == "/favicon.ico":
            return self._static(req, "favicon.svg")
        return Response(404, b"not found\n")

    def _login(self, req: Request, logged_in: bool) -> Response:
        code = req.query("code")
        session = self.access.redeem(code)
        if session is not None and code is not None:
            _, dead = self.access.sessions_in(req.header("cookie"))
            if self.on_login is not None:
                self.on_login(code)
            return Response(
                303,
                b"",
                headers=[
                    ("Location", "/"),
                    *(("Set-Cookie", self.access.expire_cookie(name)) for name in dead),
                    ("Set-Cookie", self.access.set_cookie(session)),
                    ("Cache-Control", "no-store"),
                ],
            )
        if logged_in:
            return Response(303, b"", headers=[("Location", "/"), ("Cache-Control", "no-store")])
        return self._page(
            403,
            "this link has expired",
            "A link from `thrum ui` works once and for 5 minutes. Run `thrum ui` again for a new one.",
        )

    def _static(self, req: Request, name: str) -> Response:
        f = self.static.get(name)
        if f is None or name == "index.html":
            return Response(404, b"not found\n")
        headers = [("ETag", f.etag), ("Cache-Control", "no-cache")]
        if req.header("if-none-match") == f.etag:
            return Response(304, b"", headers=headers, content_type=f.content_type)
        return Response(200, f.body, headers=headers, content_type=f.content_type)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")

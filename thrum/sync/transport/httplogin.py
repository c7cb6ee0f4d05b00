"""HTTPS logins a server accepted, so the next operation sends them at once.

libgit2 sends no credentials before a server asks: every fetch, push or tip check over
HTTPS began with a 401 round trip (issue 30, conversations at seconds). Rules:

1. Once an operation with a login succeeded, the next operation on the same remote
   (scheme, host and port, path) with the same login sends it with its first request
   (`preset`, given to libgit2 as a custom header).
2. Only a digest of the accepted login is kept, never the login: a token a ``thrum sync``
   passed along still ends with its cycle (thrum.sync.transport.credentials, rule 1).
3. A login refused afterwards is forgotten (`settled`); that operation fails as any
   refused login does, and the next one waits for the server's challenge again.
4. Like libgit2's own login after a challenge, the header goes wherever the remote's
   first answer redirects.
"""

from __future__ import annotations

import base64
import hashlib
import threading

__all__ = ["digest", "preset", "settled"]

Key = tuple[str, str, str]  # (scheme, host[:port], path)

_ACCEPTED: dict[Key, str] = {}  # remote -> digest of the login it accepted last (rule 2)
_LOCK = threading.Lock()


def digest(user: str, password: str) -> str:
    return hashlib.sha256(f"{user}:{password}".encode()).hexdigest()


def preset(key: Key | None, user: str, password: str) -> list[str] | None:
    """The ``Authorization`` header to send at once, when ``key`` accepted this login (rule 1)."""
    if key is None:
        return None
    with _LOCK:
        if _ACCEPTED.get(key) != digest(user, password):
            return None
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return [f"Authorization: Basic {token}"]


def settled(key: Key | None, login_digest: str | None, ok: bool, refused: bool) -> None:
    """After an operation that gave a login: remember it when it worked, forget the remote's
    when it was refused (rule 3)."""
    if key is None or login_digest is None:
        return
    with _LOCK:
        if ok:
            _ACCEPTED[key] = login_digest
        elif refused:
            _ACCEPTED.pop(key, None)

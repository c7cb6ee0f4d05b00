"""A failed network operation as one line a person can act on (`translate`).

Every exception a fetch, push or look raises becomes one `SyncError` naming the remote,
with credentials in URLs redacted: a timeout, a refused login, a refused host key, an
object of the wrong type, an unreachable remote are each told apart.
"""

from __future__ import annotations

import pygit2

from .. import AuthError, RemoteUnreachable, SyncError
from .urls import redact_text, url_secrets

__all__ = ["HostKeyRefused", "translate"]


class HostKeyRefused(AuthError):
    """The SSH server's host key is not the one ``~/.ssh/known_hosts`` lists (or none is)."""


_TIMEOUT_WORDS = ("timed out", "timeout", "time out")


_TIMEOUT_WORDS = ("timed out", "timeout", "time out")


def translate(exc: BaseException, remote_name: str, url: str, timeout_s: float | None = None) -> SyncError:
    """One clear SyncError for anything a network operation raised (credentials redacted)."""
    if isinstance(exc, SyncError):
        return exc
    where = f"remote {remote_name} ({redact_text(url)})"
    msg = redact_text((str(exc).strip().splitlines() or [type(exc).__name__])[0], *url_secrets(url))
    low = msg.lower()
    if any(w in low for w in _TIMEOUT_WORDS):
        limit = f"within {timeout_s:g} s" if timeout_s else "in time"
        return RemoteUnreachable(
            f"{where} did not answer {limit} ({msg}); check the network, or raise the limit "
            f'with THRUM_NET_TIMEOUT or "net_timeout" in .thrum/config.json'
        )
    if "type does not match" in low or "is not a tree" in low or "not a valid tree" in low:
        return SyncError(
            f"{where} holds an object of the wrong type under its tip ({msg}): the tip is refused and local "
            f"work goes on; someone with write access to the remote put it there: repair it (`git fsck` there)"
        )
    if "hostkey" in low or "host key" in low:
        return HostKeyRefused(f"{where}: the SSH host key could not be verified ({msg})")
    if isinstance(exc, pygit2.AuthError) or "authentication" in low or "401" in low:
        return AuthError(f"authentication to {where} failed: {msg}")
    if "403" in low:
        return AuthError(f"{where} refused access (HTTP 403): the login has no permission for this repository")
    if "unsupported url protocol" in low and "://" not in url:
        return RemoteUnreachable(f"{where} is unreachable: no git repository at that path")
    return RemoteUnreachable(f"{where} is unreachable: {msg}")

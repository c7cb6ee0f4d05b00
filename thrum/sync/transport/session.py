"""One network operation on a git remote, the way ``git push`` would do it.

Rules:

1. The remote is reached where `endpoint` says it is (relative paths resolved
   against the main checkout, SSH hosts as OpenSSH resolves them). A repository on
   this machine goes through libgit2's own local transport, after `pathremote` looked
   at it (ownership, redirections, links, special files); a push to it is confirmed by
   reading its ref back (`push_confirmed`): libgit2's local transport moves the ref
   without comparing it with the value it checked, so a racing pusher could be
   overwritten unnoticed.
2. Proxies are auto-detected as git does (``http.proxy``, ``https_proxy``, …).
3. The network timeout (``net_timeout``, default 60 s) is set on libgit2 before each
   operation (connect timeout: the smaller of it and 10 s). libgit2 keeps these
   process-wide; every network operation of thrum sets them first.
4. `session` wraps one fetch, push or ref listing: it yields the remote and fresh
   callbacks, approves or rejects a login from git's helpers by the outcome, and
   turns any failure into one `SyncError` naming the remote (URL redacted).
5. A push that lost a race to another pusher is told apart from other refusals
   by what the server or libgit2 says (`lost_race`), in every form they say it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import Option

from ..gitstore.gitlib import tune_pack_building
from .callbacks import SyncCallbacks
from .credentials import Credentials, credentials_from_env
from .failures import translate
from .endpoint import Endpoint, endpoint
from .pathremote import PathRemote, inspect_path_remote

log = logging.getLogger(__name__)

__all__ = ["Session", "apply_timeout", "configured_url", "list_remote_heads", "lost_race", "session"]

CONNECT_TIMEOUT_MS = 10_000


def apply_timeout(timeout_s: float) -> None:
    """Set libgit2's read and connect timeouts (process-wide) for the next operation."""
    ms = max(1, int(timeout_s * 1000))
    try:
        pygit2.settings.server_timeout = ms
        pygit2.settings.server_connect_timeout = min(ms, CONNECT_TIMEOUT_MS)
    except (AttributeError, pygit2.GitError):  # an older libgit2: keep its defaults
        pass


def configured_url(repo: pygit2.Repository, remote_name: str, *, push: bool = False) -> str | None:
    """The URL configured for remote ``remote_name`` (its push URL when set and ``push``),
    as written; None when there is no such remote."""
    try:
        remote = repo.remotes[remote_name]
    except KeyError:
        return None
    return (remote.push_url if push else None) or remote.url or ""


@dataclass
class Session:
    remote: pygit2.Remote
    callbacks: SyncCallbacks
    endpoint: Endpoint
    path_remote: PathRemote | None = None  # what `pathremote` found: a remote on this machine


@contextmanager
def session(
    repo: pygit2.Repository,
    remote_name: str,
    base_dir: Path,
    credentials: Credentials | None = None,
    *,
    push: bool = False,
) -> Iterator[Session]:
    """One network operation on the remote (see the module rules); ``base_dir`` is the
    main checkout, where a relative remote path starts.

    Raises:
        AuthError, HostKeyRefused, RemoteUnreachable, SyncError: one line each.
    """
    creds = credentials if credentials is not None else credentials_from_env()
    ep = endpoint(remote_name, configured_url(repo, remote_name, push=push), base_dir, home=creds.home())
    apply_timeout(creds.timeout_s)
    tune_pack_building()  # no delta search in the packs of this operation, on either side
    foreign = False
    looked: PathRemote | None = None
    if ep.kind == "local":
        where = f"remote {remote_name} ({ep.display})"
        looked = inspect_path_remote(ep.path, where=where, trusted=creds.trusted_paths)
        foreign = not looked.owned
    remote = repo.remotes[remote_name] if ep.url == ep.configured else repo.remotes.create_anonymous(ep.url)
    callbacks = SyncCallbacks(creds, ep)
    saved_sock = os.environ.get("SSH_AUTH_SOCK")
    sock = creds.ssh_auth_sock()
    if ep.kind == "ssh" and sock and sock != saved_sock:
        os.environ["SSH_AUTH_SOCK"] = sock  # libssh2 reads the agent's socket from the process environment
    if foreign:  # trusted by the user's word (pathremote rule 1): libgit2 would refuse it
        _owner_check(off=True)
    try:
        yield Session(remote, callbacks, ep, looked)
    except Exception as exc:  # noqa: BLE001 - translated at this boundary
        err = translate(exc, remote_name, ep.display, creds.timeout_s)
        callbacks.settle(False, err)
        if err is exc:
            raise
        raise err from exc
    else:
        callbacks.settle(True)
    finally:
        if foreign:
            _owner_check(off=False)
        if ep.kind == "ssh" and sock and sock != saved_sock:
            if saved_sock is None:
                os.environ.pop("SSH_AUTH_SOCK", None)
            else:
                os.environ["SSH_AUTH_SOCK"] = saved_sock


def list_remote_heads(
    repo: pygit2.Repository, remote_name: str, base_dir: Path, credentials: Credentials | None = None
) -> dict[str, pygit2.Oid]:
    """The remote's refs (name -> oid): a connection, a login, one ref advertisement."""
    with session(repo, remote_name, base_dir, credentials) as s:
        heads = s.remote.list_heads(callbacks=s.callbacks, proxy=True)
        return {h.name: h.oid for h in heads if h.name is not None and not h.name.endswith("^{}")}


_owner_check_lock = threading.Lock()
_owner_check_off = 0  # operations on a trusted foreign path remote under way


def _owner_check(*, off: bool) -> None:
    """libgit2's ownership check is process-wide: it stays off while any operation on a
    trusted foreign path remote is under way, and comes back when the last one ends (two
    threads toggling it on their own would turn it back on under each other)."""
    global _owner_check_off
    with _owner_check_lock:
        _owner_check_off += 1 if off else -1
        if (off and _owner_check_off == 1) or (not off and _owner_check_off == 0):
            pygit2.option(Option.SET_OWNER_VALIDATION, 0 if off else 1)


def lost_race(message: str) -> bool:
    """A push that lost to another pusher, in any of the forms servers and libgit2 say it."""
    low = message.lower()
    return any(
        s in low
        for s in (
            "non-fastforward",
            "non-fast-forward",
            "not present locally",
            "fetch first",
            "stale info",
            "failed to lock",
            "cannot lock ref",
            "reference already exists",
            "reference with that name already exists",
            "failed to update ref",
            "locked file",
            "unable to lock",
            "could not lock",
            "old reference value does not match",
            "incorrect old value",
        )
    )

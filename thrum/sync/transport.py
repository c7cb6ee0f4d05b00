"""Reaching a git remote the way ``git push`` would: URL, SSH config, timeout, errors.

Rules:

1. A relative remote path is resolved against the main checkout (``urls``), so
   ``git remote add origin ../team.git`` works in every thrum process whatever its
   current directory; ``file://`` URLs are paths too.
2. An SSH host is resolved through ``~/.ssh/config`` (``sshconfig``): libgit2 is
   given ``ssh://user@HostName:Port/path``, and the callbacks the host's
   ``IdentityFile``\\ s. The user is always written into that URL.
3. Proxies are auto-detected as git does (``http.proxy``, ``https_proxy``, …).
4. The network timeout (``net_timeout``, default 60 s) is set on libgit2 before each
   operation (connect timeout: the smaller of it and 10 s). libgit2 keeps these
   process-wide; every network operation of thrum sets them first.
5. `session` wraps one fetch, push or ref listing: it yields the remote and fresh
   callbacks, approves or rejects a login from git's helpers by the outcome, and
   turns any failure into one `SyncError` naming the remote (URL redacted).
6. A push that lost a race to another pusher is told apart from other refusals
   by what the server or libgit2 says (`lost_race`), in every form they say it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from . import SyncError
from .credentials import Credentials, SyncCallbacks, credentials_from_env, translate
from .sshconfig import resolve_host
from .urls import main_worktree_dir, parse_url, redact_url

log = logging.getLogger(__name__)

__all__ = ["Endpoint", "apply_timeout", "endpoint", "list_remote_heads", "lost_race", "resolved_url", "session"]

CONNECT_TIMEOUT_MS = 10_000


@dataclass
class Endpoint:
    """Where a remote really is. ``url`` goes to libgit2; ``display`` is for people."""

    remote_name: str
    configured: str  # as configured: may hold a password; never shown
    url: str
    display: str
    kind: str  # local, http, ssh, git, other
    scheme: str = ""
    host_port: str = ""  # host[:port] as git's credential protocol wants it
    path: str = ""
    user: str | None = None
    url_user: str | None = None
    url_password: bool = False
    port: int = 22
    identity_files: list[str] = field(default_factory=list)
    identities_only: bool = False
    ssh_alias: str | None = None
    base_dir: Path | None = None


def _base_dir(repo: pygit2.Repository) -> Path:
    """The main checkout of ``repo`` (which may be the a-sync linked worktree)."""
    from .worktree import common_dir

    try:
        return main_worktree_dir(common_dir(repo.workdir or repo.path))
    except SyncError:
        return Path(repo.workdir or repo.path)


def resolved_url(repo: pygit2.Repository, url: str) -> str:
    """``url`` with a relative path made absolute against the main checkout."""
    parsed = parse_url(url, _base_dir(repo))
    return parsed.path if parsed.kind == "local" and "://" not in url else url


def _remote(repo: pygit2.Repository, remote_name: str) -> pygit2.Remote:
    try:
        return repo.remotes[remote_name]
    except KeyError:
        raise SyncError(
            f"no remote named {remote_name} is configured (add one with `git remote add {remote_name} URL`)"
        ) from None


def endpoint(repo: pygit2.Repository, remote_name: str, *, push: bool = False, home: str | None = None) -> Endpoint:
    """Resolve the remote's (push) URL: relative paths, SSH aliases.

    Raises:
        SyncError: no such remote.
    """
    remote = _remote(repo, remote_name)
    configured = (remote.push_url if push else None) or remote.url or ""
    base = _base_dir(repo)
    p = parse_url(configured, base)
    ep = Endpoint(
        remote_name,
        configured,
        configured,
        redact_url(configured) or "",
        p.kind,
        p.scheme,
        path=p.path,
        url_user=p.user,
        url_password=p.password is not None,
        base_dir=base,
    )
    if p.kind == "local":
        ep.url = p.path if "://" not in configured else configured
        ep.display = redact_url(ep.url) or ""
    elif p.kind == "http":
        ep.host_port = p.host + (f":{p.port}" if p.port else "") if p.host else ""
        ep.user = p.user
    elif p.kind == "ssh" and p.host:
        target = resolve_host(p.host, url_user=p.user, url_port=p.port, home=home or os.environ.get("HOME") or None)
        ep.ssh_alias = p.host if target.hostname != p.host else None
        ep.user, ep.port = target.user, target.port
        ep.identity_files, ep.identities_only = target.identity_files, target.identities_only
        ep.host_port = target.hostname
        ep.url = _ssh_url(target.user, target.hostname, target.port, p.path, p.scp)
    return ep


def _ssh_url(user: str, host: str, port: int, path: str, scp: bool) -> str:
    host_part = f"[{host}]" if ":" in host else host
    if scp and not path.startswith("/"):
        if port == 22:
            return f"{user}@{host_part}:{path}"  # keeps the path relative to the login's home
        path = "~/" + path
    if not path.startswith("/"):
        path = "/" + path
    return f"ssh://{user}@{host_part}:{port}{path}"


def apply_timeout(timeout_s: float) -> None:
    """Set libgit2's read and connect timeouts (process-wide) for the next operation."""
    ms = max(1, int(timeout_s * 1000))
    try:
        pygit2.settings.server_timeout = ms
        pygit2.settings.server_connect_timeout = min(ms, CONNECT_TIMEOUT_MS)
    except (AttributeError, pygit2.GitError):  # an older libgit2: keep its defaults
        pass


@dataclass
class Session:
    remote: pygit2.Remote
    callbacks: SyncCallbacks
    endpoint: Endpoint


@contextmanager
def session(
    repo: pygit2.Repository, remote_name: str, credentials: Credentials | None = None, *, push: bool = False
) -> Iterator[Session]:
    """One network operation on the remote (see the module rules).

    Raises:
        AuthError, HostKeyRefused, RemoteUnreachable, SyncError: one line each.
    """
    creds = credentials if credentials is not None else credentials_from_env()
    ep = endpoint(repo, remote_name, push=push, home=creds.home())
    apply_timeout(creds.timeout_s)
    remote = repo.remotes[remote_name] if ep.url == ep.configured else repo.remotes.create_anonymous(ep.url)
    callbacks = SyncCallbacks(creds, ep)
    saved_sock = os.environ.get("SSH_AUTH_SOCK")
    sock = creds.ssh_auth_sock()
    if ep.kind == "ssh" and sock and sock != saved_sock:
        os.environ["SSH_AUTH_SOCK"] = sock  # libssh2 reads the agent's socket from the process environment
    try:
        yield Session(remote, callbacks, ep)
    except Exception as exc:  # noqa: BLE001 - translated at this boundary
        err = translate(exc, remote_name, ep.display, creds.timeout_s)
        callbacks.settle(False, err)
        if err is exc:
            raise
        raise err from exc
    else:
        callbacks.settle(True)
    finally:
        if ep.kind == "ssh" and sock and sock != saved_sock:
            if saved_sock is None:
                os.environ.pop("SSH_AUTH_SOCK", None)
            else:
                os.environ["SSH_AUTH_SOCK"] = saved_sock


def list_remote_heads(
    repo: pygit2.Repository, remote_name: str, credentials: Credentials | None = None
) -> dict[str, pygit2.Oid]:
    """The remote's refs (name -> oid): a connection, a login, one ref advertisement."""
    with session(repo, remote_name, credentials) as s:
        heads = s.remote.list_heads(callbacks=s.callbacks, proxy=True)
        return {h.name: h.oid for h in heads if not h.name.endswith("^{}")}


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
            "failed to update ref",
            "locked file",
            "unable to lock",
            "could not lock",
            "old reference value does not match",
            "incorrect old value",
        )
    )

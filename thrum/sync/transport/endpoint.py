"""Where a git remote really is: its URL resolved the way ``git push`` resolves it.

Rules:

1. A relative remote path is resolved against the main checkout (``urls``), so
   ``git remote add origin ../team.git`` works in every thrum process whatever its
   current directory; ``file://`` URLs are paths too.
2. An SSH host is resolved as OpenSSH resolves it (``ssh``): libgit2 is given
   ``ssh://user@HostName:Port/path``, and the login callbacks the host's
   ``IdentityFile``\\ s. The user is always written into that URL.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import SyncError
from .ssh import resolve_host
from .urls import parse_url, redact_url

__all__ = ["Endpoint", "endpoint", "resolved_url"]


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


def resolved_url(url: str, base_dir: Path) -> str:
    """``url`` with a relative path made absolute against ``base_dir`` (the main checkout)."""
    parsed = parse_url(url, base_dir)
    return parsed.path if parsed.kind == "local" and "://" not in url else url


def endpoint(remote_name: str, configured: str | None, base_dir: Path, *, home: str | None = None) -> Endpoint:
    """Resolve the URL ``configured`` for remote ``remote_name`` (its push URL for a push;
    None: no such remote): relative paths against ``base_dir`` (the main checkout), SSH aliases.

    Raises:
        SyncError: no such remote.
    """
    if configured is None:
        raise SyncError(
            f"no remote named {remote_name} is configured (add one with `git remote add {remote_name} URL`)"
        )
    base = base_dir
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

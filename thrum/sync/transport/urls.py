"""Remote URLs as users write them: kinds, relative paths, and hiding credentials.

Pure (no pygit2): parsing and redaction only, so every layer can use it.

Rules:

1. A remote is one of: a path on this machine (absolute, relative or ``file://``),
   ``http(s)://``, ``ssh://`` (also ``git+ssh://``, ``ssh+git://``) or git's scp-like
   ``[user@]host:path``, or ``git://``. Git's rule decides between a path and the
   scp-like form: a colon before the first slash means a host.
2. A relative path is relative to the top of the user's working tree (the main
   checkout; the git dir for a bare repository), as git resolves it, never to the
   daemon's current directory.
3. Credentials written into a URL (``https://user:token@host/…``) are never shown or
   stored: :func:`redact_url` replaces the password, and a user name that looks like
   a token, with ``***``; :func:`redact_text` does the same inside any message.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RemoteURL", "main_worktree_dir", "parse_url", "redact_text", "redact_url", "resolve_url", "url_secrets"]

_SSH_SCHEMES = ("ssh", "git+ssh", "ssh+git")
# Prefixes of access tokens that hosts accept as a user name (GitHub, GitLab, Gitea, Bitbucket).
_TOKEN_PREFIXES = (
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "gldt-",
    "glcbt-",
    "glrt-",
    "ATBB",
    "ATCTT",
)
_PLAIN_USER = re.compile(r"^[A-Za-z0-9._-]{1,39}$")
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s'\"]+)@")


@dataclass(frozen=True)
class RemoteURL:
    """One remote URL, taken apart. ``kind`` is local, http, ssh, git or other."""

    raw: str
    kind: str
    scheme: str = ""
    user: str | None = None
    password: str | None = None
    host: str | None = None
    port: int | None = None
    path: str = ""
    scp: bool = False  # written as [user@]host:path

    @property
    def has_secret(self) -> bool:
        return self.password is not None or (self.user is not None and not _is_plain_user(self.user))


def _is_plain_user(user: str) -> bool:
    return bool(_PLAIN_USER.match(user)) and not user.startswith(_TOKEN_PREFIXES)


def _is_scp_like(url: str) -> bool:
    """git's rule: ``host:path`` when a colon comes before any slash (and it is not a path)."""
    colon = url.find(":")
    if colon <= 0:
        return False
    slash = url.find("/")
    if 0 <= slash < colon:
        return False
    host = url[:colon]
    return not (len(host) == 1 and host.isalpha() and os.name == "nt")  # C:\… on Windows


def parse_url(url: str, base: os.PathLike[str] | str | None = None) -> RemoteURL:
    """Take ``url`` apart; a relative local path is made absolute against ``base``."""
    url = url.strip()
    if "://" in url:
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        try:
            port = parts.port
        except ValueError:
            port = None
        user = urllib.parse.unquote(parts.username) if parts.username is not None else None
        password = urllib.parse.unquote(parts.password) if parts.password is not None else None
        if scheme == "file":
            rest = url[len("file://") :]
            if rest.startswith("localhost/"):
                rest = rest[len("localhost") :]
            path = urllib.parse.unquote(rest) if rest.startswith("/") else ""
            return RemoteURL(url, "local" if path else "other", scheme, path=path)
        if scheme in ("http", "https"):
            kind = "http"
        elif scheme in _SSH_SCHEMES:
            kind = "ssh"
        elif scheme == "git":
            kind = "git"
        else:
            kind = "other"
        return RemoteURL(url, kind, scheme, user, password, parts.hostname, port, urllib.parse.unquote(parts.path))
    if _is_scp_like(url):
        userhost, _, path = url.partition(":")
        user, at, host = userhost.rpartition("@")
        return RemoteURL(url, "ssh", "ssh", user if at else None, None, host.strip("[]"), None, path, scp=True)
    path = os.path.expanduser(url)
    if not os.path.isabs(path) and base is not None:
        path = os.path.normpath(os.path.join(os.fspath(base), path))
    return RemoteURL(url, "local", "", path=path)


def resolve_url(url: str, base: os.PathLike[str] | str | None) -> str:
    """``url`` with a relative local path made absolute against ``base``; else unchanged."""
    parsed = parse_url(url, base)
    if parsed.kind == "local" and "://" not in url:
        return parsed.path
    return url


def redact_url(url: str | None) -> str | None:
    """``url`` with any password, and a user name that looks like a token, replaced by ``***``."""
    if url is None:
        return None
    return redact_text(url)


def redact_text(text: str, *secrets: str | None) -> str:
    """``text`` with credentials inside URLs, and each of ``secrets``, replaced by ``***``."""

    def repl(m: re.Match[str]) -> str:
        userinfo = m.group("userinfo")
        user, colon, _ = userinfo.partition(":")
        shown = user if _is_plain_user(urllib.parse.unquote(user)) else "***"
        return f"{m.group('scheme')}{shown}{':***' if colon else ''}@"

    out = _URL_USERINFO.sub(repl, text)
    for secret in secrets:
        if secret and len(secret) >= 4:
            out = out.replace(secret, "***")
    return out


def url_secrets(url: str | None) -> list[str]:
    """The secrets written in ``url`` (a password, a user name that is a token), to redact."""
    if not url:
        return []
    p = parse_url(url)
    out = [p.password] if p.password else []
    if p.user and p.has_secret and p.password is None:
        out.append(p.user)
    return out


def main_worktree_dir(common_dir: os.PathLike[str] | str) -> Path:
    """Where relative remote paths are resolved: the main checkout (or the bare git dir)."""
    common = Path(common_dir)
    return common.parent if common.name == ".git" else common

"""Credentials for the git remote, and turning network failures into clear errors.

Rules:

1. SSH tries a key file (``THRUM_SSH_KEY`` or ``ssh_key`` in the config), then the
   ssh-agent; HTTPS uses a token from ``THRUM_GIT_TOKEN``. Each is tried once:
   libgit2 calls the callback again forever after a refusal, so a second call for
   the same kind raises `AuthError` instead of looping.
2. Every exception a network operation raises becomes one `SyncError` with a
   one-line message naming the remote (`translate`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import pygit2
from pygit2.enums import CredentialType

from . import AuthError, RemoteUnreachable, SyncError
from .worktree import ensure_network_timeouts

log = logging.getLogger(__name__)


@dataclass
class Credentials:
    """How to authenticate to the remote. Unset fields are simply not tried."""

    ssh_key_path: str | None = None
    ssh_pubkey_path: str | None = None
    ssh_passphrase: str | None = None
    use_ssh_agent: bool = True
    https_username: str | None = None
    https_token: str | None = None

    def __repr__(self) -> str:  # never print secrets in logs
        return (f"Credentials(ssh_key_path={self.ssh_key_path!r}, use_ssh_agent={self.use_ssh_agent}, "
                f"https_username={self.https_username!r}, https_token={'***' if self.https_token else None})")


def credentials_from_env(config: dict | None = None, environ: dict | None = None) -> Credentials:
    """Credentials from ``THRUM_GIT_TOKEN`` / ``THRUM_GIT_USERNAME`` / ``THRUM_SSH_KEY``.

    ``config`` (the ``sync`` settings) may give ``ssh_key`` and ``https_username``;
    the environment wins over it.
    """
    env = os.environ if environ is None else environ
    config = config or {}
    token = env.get("THRUM_GIT_TOKEN") or None
    username = env.get("THRUM_GIT_USERNAME") or config.get("https_username") or None
    key = env.get("THRUM_SSH_KEY") or config.get("ssh_key") or None
    if key:
        key = os.path.expanduser(key)
    return Credentials(
        ssh_key_path=key,
        https_token=token,
        https_username=username or ("x-access-token" if token else None),
    )


class _Callbacks(pygit2.RemoteCallbacks):
    """Credentials tried at most once each, and push rejections recorded."""

    def __init__(self, credentials: Credentials | None):
        super().__init__()
        self._creds = credentials or Credentials()
        self._tried: set[str] = set()
        self.rejected: list[tuple[str, str]] = []

    def credentials(self, url, username_from_url, allowed_types):
        c = self._creds
        user = username_from_url or "git"
        if allowed_types & CredentialType.USERNAME and "username" not in self._tried:
            self._tried.add("username")
            return pygit2.Username(user)
        if allowed_types & CredentialType.SSH_KEY:
            if c.ssh_key_path and "ssh-key" not in self._tried:
                self._tried.add("ssh-key")
                pub = c.ssh_pubkey_path
                if pub is None and os.path.exists(c.ssh_key_path + ".pub"):
                    pub = c.ssh_key_path + ".pub"
                return pygit2.Keypair(user, pub, c.ssh_key_path, c.ssh_passphrase or "")
            if c.use_ssh_agent and os.environ.get("SSH_AUTH_SOCK") and "ssh-agent" not in self._tried:
                self._tried.add("ssh-agent")
                return pygit2.KeypairFromAgent(user)
        if allowed_types & CredentialType.USERPASS_PLAINTEXT:
            if c.https_token and "token" not in self._tried:
                self._tried.add("token")
                return pygit2.UserPass(c.https_username or username_from_url or "x-access-token", c.https_token)
        if self._tried - {"username"}:
            reason = "the remote rejected the configured credentials"
        elif allowed_types & CredentialType.USERPASS_PLAINTEXT:
            reason = "no token configured (set THRUM_GIT_TOKEN)"
        else:
            reason = "no SSH key configured and no ssh-agent (set THRUM_SSH_KEY or start ssh-agent)"
        raise AuthError(f"authentication to {url} failed: {reason}")

    def push_update_reference(self, refname, message):
        if message:
            self.rejected.append((refname, message))


def remote_callbacks(credentials: Credentials | None = None) -> pygit2.RemoteCallbacks:
    """Fresh callbacks for one network operation (also for ``ensure_sync_worktree``)."""
    ensure_network_timeouts()
    return _Callbacks(credentials)


def translate(exc: BaseException, remote_name: str, url: str) -> SyncError:
    """One clear SyncError for anything a network operation raised."""
    if isinstance(exc, SyncError):
        return exc
    msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    low = msg.lower()
    if isinstance(exc, pygit2.AuthError) or "authentication" in low or "401" in low or "403" in low:
        return AuthError(f"authentication to {url} failed: {msg}")
    if "unsupported url protocol" in low and "://" not in url:
        return RemoteUnreachable(f"remote {remote_name} is unreachable: no git repository at {url}")
    return RemoteUnreachable(f"remote {remote_name} ({url}) is unreachable: {msg}")

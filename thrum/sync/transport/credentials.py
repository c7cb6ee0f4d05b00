"""Where logins for a git remote come from (`Credentials`), looked up when an operation needs them.

Rules:

1. Where a login comes from, in order (each tried once per operation; the tries are
   `callbacks.SyncCallbacks`'s):
   - HTTPS: a password written in the remote URL (libgit2 tries it itself); then
     ``THRUM_GIT_TOKEN`` (passed along by the ``thrum sync`` that asked for the cycle,
     else the daemon's own environment); then git's credential helpers through
     ``git credential fill`` (``gitcredential``), approved or rejected by the outcome.
     The first login the server refuses ends the operation with one line naming the
     remote, the user and where the login came from: no second guess, no loop.
   - SSH: ``THRUM_SSH_KEY`` / ``"ssh_key"``, then the ssh-agent, then the
     ``IdentityFile``\\ s OpenSSH resolves for that host, then the default key files
     (``~/.ssh/id_rsa``, ``id_ecdsa``, ``id_ed25519``, ``id_dsa``) when it names
     none. Encrypted key files are skipped (libssh2 cannot ask for a passphrase): load
     them into the agent (`key_file_problem`). When all are refused, one line says what was tried.
   - What a ``thrum sync`` passes along (logins only, `thrum.config.FORWARDED_ENV`)
     serves the cycle it asked for and nothing after it: automatic cycles log in with
     the daemon's own environment and config.
   - HTTPS, once a server accepted a login: the next operation on the same remote
     with the same login sends it with its first request, not after a 401 round trip
     (`callbacks`, `httplogin`; only a digest of it is kept).
2. The network timeout travels with the credentials: both are read from the config
   and the environment when a cycle starts.

No pygit2: the record is read by the git store's interface (`thrum.sync.gitstore.api`)
and built by the daemon and the CLI; libgit2's side of a login is `callbacks`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .forwarded import is_socket
from .gitcredential import GitCredential

__all__ = ["DEFAULT_TIMEOUT_S", "Credentials", "credentials_from_env", "key_file_problem"]

DEFAULT_TIMEOUT_S = 60.0


@dataclass
class Credentials:
    """Where logins may come from for one sync (built fresh for each cycle).

    ``environ`` is the environment for ``git credential`` and the ssh-agent: the
    daemon's, overlaid with what the ``thrum sync`` that asked for the cycle passed
    along. ``timeout_s`` is the network timeout (it travels with the credentials:
    both are read from the config and the environment when the cycle starts).
    """

    ssh_key_path: str | None = None
    ssh_pubkey_path: str | None = None
    ssh_passphrase: str | None = None
    use_ssh_agent: bool = True
    https_username: str | None = None
    https_token: str | None = None
    token_source: str = "THRUM_GIT_TOKEN"
    ssh_key_source: str = "THRUM_SSH_KEY"
    use_git_helpers: bool = True
    environ: dict[str, str] | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    trusted_paths: tuple[str, ...] = ()  # path remotes another user may own ("trusted_remote_paths")
    last_source: str | None = None  # set by the callbacks: the login the server accepted
    # git's helpers' answers, per remote
    helper_cache: dict[object, GitCredential] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:  # never print secrets in logs
        return (
            f"Credentials(ssh_key_path={self.ssh_key_path!r}, use_ssh_agent={self.use_ssh_agent}, "
            f"https_username={self.https_username!r}, https_token={'***' if self.https_token else None}, "
            f"token_source={self.token_source!r})"
        )

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ) if self.environ is None else self.environ

    def ssh_auth_sock(self) -> str | None:
        sock = self.env.get("SSH_AUTH_SOCK")
        return sock if sock and is_socket(sock) else None

    def home(self) -> str:
        return self.env.get("HOME") or os.path.expanduser("~")


def credentials_from_env(
    config: dict[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    forwarded: Mapping[str, object] | None = None,
    *,
    own: str = "the environment",
    passed: str = "the environment of `thrum sync`",
    passed_by: dict[str, str] | None = None,
) -> Credentials:
    """Credentials from ``THRUM_GIT_TOKEN`` / ``THRUM_GIT_USERNAME`` / ``THRUM_SSH_KEY``.

    ``forwarded`` (the variables a ``thrum sync`` passed along) wins over ``environ``
    (this process's), which wins over ``config`` (the ``sync`` settings: ``ssh_key``,
    ``https_username``, ``net_timeout``). ``own`` and ``passed`` name those two
    environments in messages; ``passed_by`` names, per variable, another process that
    passed it along (``thrum doctor``).
    """
    env = dict(os.environ if environ is None else environ)
    passed_along = {k: v for k, v in (forwarded or {}).items() if isinstance(v, str) and v}
    config = config or {}

    def pick(name: str) -> tuple[str | None, str]:
        if passed_along.get(name):
            return passed_along[name], f"{name} from {(passed_by or {}).get(name, passed)}"
        if env.get(name):
            return env[name], f"{name} from {own}"
        return None, name

    token, token_source = pick("THRUM_GIT_TOKEN")
    username = pick("THRUM_GIT_USERNAME")[0] or config.get("https_username") or None
    key, key_source = pick("THRUM_SSH_KEY")
    if not key and config.get("ssh_key"):
        key, key_source = str(config["ssh_key"]), '"ssh_key" in .thrum/config.json'
    merged = {**env, **passed_along}
    if passed_along.get("SSH_AUTH_SOCK") and not is_socket(passed_along["SSH_AUTH_SOCK"]) and env.get("SSH_AUTH_SOCK"):
        merged["SSH_AUTH_SOCK"] = env["SSH_AUTH_SOCK"]  # the caller's agent is gone: keep ours
    try:
        timeout = float(config.get("net_timeout") or DEFAULT_TIMEOUT_S)
    except (TypeError, ValueError):
        timeout = DEFAULT_TIMEOUT_S
    return Credentials(
        ssh_key_path=os.path.expanduser(key) if key else None,
        https_token=token,
        https_username=username,
        token_source=token_source,
        ssh_key_source=key_source,
        environ=merged,
        timeout_s=timeout if timeout > 0 else DEFAULT_TIMEOUT_S,
        trusted_paths=tuple(str(p) for p in (config.get("trusted_remote_paths") or ()) if isinstance(p, str)),
    )


# --- key files --------------------------------------------------------------------


def key_file_problem(path: str, passphrase: str | None = None) -> str | None:
    """Why libssh2 could not use the private key at ``path`` (None: it can try)."""
    try:
        text = open(path, "rb").read(64 * 1024)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if passphrase:
        return None
    if b"ENCRYPTED" in text:  # PEM: Proc-Type: 4,ENCRYPTED / BEGIN ENCRYPTED PRIVATE KEY
        return "encrypted (load it into ssh-agent with ssh-add)"
    if b"BEGIN OPENSSH PRIVATE KEY" in text:
        try:
            body = b"".join(line for line in text.splitlines() if line and not line.startswith(b"-----"))
            raw = base64.b64decode(body)
            magic = b"openssh-key-v1\0"
            n = int.from_bytes(raw[len(magic) : len(magic) + 4], "big")
            cipher = raw[len(magic) + 4 : len(magic) + 4 + n]
        except (ValueError, IndexError):
            return None
        if raw.startswith(magic) and cipher != b"none":
            return "encrypted (load it into ssh-agent with ssh-add)"
    return None

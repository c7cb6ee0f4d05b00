"""Credentials for a git remote, looked up when a network operation needs them.

Rules:

1. Where a login comes from, in order (each tried once per operation):
   - HTTPS: a password written in the remote URL (libgit2 tries it itself); then
     ``THRUM_GIT_TOKEN`` (passed along by the ``thrum sync`` that asked for the cycle,
     else the daemon's own environment); then git's credential helpers through
     ``git credential fill`` (``gitcredential``), approved or rejected by the outcome.
     The first login the server refuses ends the operation with one line naming the
     remote, the user and where the login came from: no second guess, no loop.
   - SSH: ``THRUM_SSH_KEY`` / ``"ssh_key"``, then the ssh-agent, then the
     ``IdentityFile``\\ s of ``~/.ssh/config`` for that host, then the default key files
     (``~/.ssh/id_rsa``, ``id_ecdsa``, ``id_ed25519``, ``id_dsa``) when the config names
     none. Encrypted key files are skipped (libssh2 cannot ask for a passphrase): load
     them into the agent. When all are refused, one line says what was tried.
   - What a ``thrum sync`` passes along (logins only, `thrum.config.FORWARDED_ENV`)
     serves the cycle it asked for and nothing after it: automatic cycles log in with
     the daemon's own environment and config.
   - HTTPS, once a server accepted a login: the next operation on the same remote
     with the same login sends it with its first request, not after a 401 round trip
     (`httplogin`; only a digest of it is kept).
2. SSH host keys are checked against ``~/.ssh/known_hosts`` (libgit2 does the
   check; pygit2 would accept any key when asked): an unknown or changed key is
   refused with a message saying what to run. Never accepted silently.
3. Every exception a network operation raises becomes one `SyncError` with a
   one-line message naming the remote, with credentials in URLs redacted (`translate`).
"""

from __future__ import annotations

import base64
import logging
import os
from dataclasses import dataclass, field

import pygit2
from pygit2.enums import CredentialType
from pygit2.errors import Passthrough

from .. import AuthError, RemoteUnreachable, SyncError
from . import gitcredential, httplogin
from .endpoint import Endpoint
from .forwarded import is_socket
from .ssh import host_label, known_host_entries, known_hosts_files
from .urls import redact_text, url_secrets


log = logging.getLogger(__name__)

__all__ = [
    "Credentials",
    "HostKeyRefused",
    "SyncCallbacks",
    "credentials_from_env",
    "remote_callbacks",
    "translate",
]

DEFAULT_TIMEOUT_S = 60.0


_SSH_TYPES = CredentialType.SSH_KEY | CredentialType.SSH_CUSTOM | CredentialType.SSH_MEMORY


class HostKeyRefused(AuthError):
    """The SSH server's host key is not the one ``~/.ssh/known_hosts`` lists (or none is)."""


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
    environ: dict | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    trusted_paths: tuple[str, ...] = ()  # path remotes another user may own ("trusted_remote_paths")
    last_source: str | None = None  # set by the callbacks: the login the server accepted
    _helper_cache: dict = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:  # never print secrets in logs
        return (
            f"Credentials(ssh_key_path={self.ssh_key_path!r}, use_ssh_agent={self.use_ssh_agent}, "
            f"https_username={self.https_username!r}, https_token={'***' if self.https_token else None}, "
            f"token_source={self.token_source!r})"
        )

    @property
    def env(self) -> dict:
        return dict(os.environ) if self.environ is None else self.environ

    def ssh_auth_sock(self) -> str | None:
        sock = self.env.get("SSH_AUTH_SOCK")
        return sock if sock and is_socket(sock) else None

    def home(self) -> str:
        return self.env.get("HOME") or os.path.expanduser("~")


def credentials_from_env(
    config: dict | None = None,
    environ: dict | None = None,
    forwarded: dict | None = None,
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
    forwarded = {k: v for k, v in (forwarded or {}).items() if isinstance(v, str) and v}
    config = config or {}

    def pick(name: str) -> tuple[str | None, str]:
        if forwarded.get(name):
            return forwarded[name], f"{name} from {(passed_by or {}).get(name, passed)}"
        if env.get(name):
            return env[name], f"{name} from {own}"
        return None, name

    token, token_source = pick("THRUM_GIT_TOKEN")
    username = pick("THRUM_GIT_USERNAME")[0] or config.get("https_username") or None
    key, key_source = pick("THRUM_SSH_KEY")
    if not key and config.get("ssh_key"):
        key, key_source = str(config["ssh_key"]), '"ssh_key" in .thrum/config.json'
    merged = {**env, **forwarded}
    if forwarded.get("SSH_AUTH_SOCK") and not is_socket(forwarded["SSH_AUTH_SOCK"]) and env.get("SSH_AUTH_SOCK"):
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


def _short(path: str, home: str) -> str:
    return "~" + path[len(home) :] if home and path.startswith(home.rstrip("/") + "/") else path


# --- the callbacks ------------------------------------------------------------------


@dataclass
class _Given:
    label: str  # where it came from, for messages
    user: str
    helper: gitcredential.GitCredential | None = None


class SyncCallbacks(pygit2.RemoteCallbacks):
    """One network operation's logins (each tried once), host key check, push rejections."""

    def __init__(self, credentials: Credentials | None, endpoint: Endpoint | None = None):
        super().__init__()
        self.creds = credentials if credentials is not None else credentials_from_env()
        self.ep = endpoint
        self.rejected: list[tuple[str, str]] = []
        self.expected: dict[str, pygit2.Oid] = {}  # push only onto these remote tips (`push_negotiation`)
        self.given: _Given | None = None
        self.tried: list[str] = []
        self.skipped: list[str] = []
        self._ssh_queue: list | None = None
        self._calls = 0
        self._login: tuple[str, str] | None = None  # the HTTPS login given (user, digest)

    # -- libgit2 hooks

    def credentials(self, url, username_from_url, allowed_types):
        self._calls += 1
        ep = self.ep
        if allowed_types & CredentialType.USERNAME:
            return pygit2.Username(username_from_url or (ep.user if ep else None) or "git")
        if allowed_types & _SSH_TYPES:
            return self._next_ssh(username_from_url or (ep.user if ep else "git"))
        if allowed_types & CredentialType.USERPASS_PLAINTEXT:
            return self._userpass(username_from_url)
        raise AuthError(f"{self._where()} asks for a kind of login thrum cannot give ({allowed_types!r})")

    def custom_headers(self):
        """The login this remote accepted before, sent with the first request (rule 1)."""
        ep, c = self.ep, self.creds
        if ep is None or ep.kind != "http" or ep.url_password:
            return None
        helper = None
        if c.https_token:
            label, user, password = c.token_source, c.https_username or ep.url_user or "x-access-token", c.https_token
        else:
            helper = c._helper_cache.get(self._helper_key())  # asked earlier in this cycle
            if helper is None:
                return None
            label, user, password = "git's credential helper", helper.username, helper.password
        header = httplogin.preset(self._helper_key(), user, password)
        if header is not None:
            self.given = _Given(label, user, helper)  # a refusal now is this login's (`_userpass`)
            self._login = (user, httplogin.digest(user, password))
        return header

    def certificate_check(self, certificate, valid, host):
        if self.ep is None or self.ep.kind != "ssh":
            raise Passthrough  # TLS: libgit2's own verdict (the system's CAs)
        hostname = host.decode() if isinstance(host, bytes) else str(host)
        if valid:
            return True
        raise HostKeyRefused(self._host_key_message(hostname, self.ep.port))

    def push_update_reference(self, refname, message):
        if message:
            self.rejected.append((refname, message))

    def push_negotiation(self, updates):
        """A push that may go only onto a known tip (``expected``: ref -> oid) stops here,
        before anything is sent, when the remote's ref is elsewhere (push-first cycles:
        `thrum.sync.cycle`); libgit2 raises the error, which names a stale tip."""
        for update in updates:
            want = self.expected.get(update.dst_refname)
            if want is not None and update.src != want:
                raise SyncError(f"stale info: the remote's {update.dst_refname} moved from {want} to {update.src}")

    # -- after the operation

    def settle(self, ok: bool, exc: BaseException | None = None) -> None:
        """Approve or reject a login from git's helpers; remember which login worked."""
        given = self.given
        httplogin.settled(self._helper_key(), self._login and self._login[1], ok, isinstance(exc, AuthError))
        if ok:
            if given is not None:
                self.creds.last_source = f"{given.label} (user {given.user})"
                if given.helper is not None:
                    gitcredential.approve(given.helper, env=self.creds.env, cwd=self._cwd())
            elif self.ep is not None and self.ep.url_password:
                self.creds.last_source = f"the password written in the remote URL (user {self.ep.url_user})"
            elif self.creds.last_source is None:
                self.creds.last_source = "none needed"
        elif given is not None and given.helper is not None and isinstance(exc, AuthError):
            gitcredential.reject(given.helper, env=self.creds.env, cwd=self._cwd())
            self.creds._helper_cache.pop(self._helper_key(), None)

    # -- HTTPS

    def _userpass(self, username_from_url: str | None):
        ep, c = self.ep, self.creds
        if self.given is not None:
            raise AuthError(self._refused(self.given))
        if self._calls == 1 and ep is not None and ep.url_password:
            raise AuthError(
                f"{self._where()} refused the password written in the remote URL "
                f"for user {ep.url_user or username_from_url}; fix the URL "
                f"(git remote set-url) or remove the password and use a credential helper"
            )
        if c.https_token:
            user = c.https_username or username_from_url or "x-access-token"
            self.given = _Given(c.token_source, user)
            self._login = (user, httplogin.digest(user, c.https_token))
            return pygit2.UserPass(user, c.https_token)
        helper = self._helper(username_from_url)
        if helper is not None:
            self.given = _Given("git's credential helper", helper.username, helper)
            self._login = (helper.username, httplogin.digest(helper.username, helper.password))
            return pygit2.UserPass(helper.username, helper.password)
        hint = (
            "set THRUM_GIT_TOKEN, or set up git's credential helper so that `git push` works "
            "(for GitHub: `gh auth setup-git`)"
        )
        if gitcredential.git_executable() is None:
            hint = "set THRUM_GIT_TOKEN (git is not installed, so git's credential helpers cannot be asked)"
        raise AuthError(f"{self._where()} asks for a login and none is configured: {hint}")

    def _helper_key(self):
        ep = self.ep
        return (ep.scheme, ep.host_port, ep.path) if ep else None

    def _helper(self, username: str | None) -> gitcredential.GitCredential | None:
        if not self.creds.use_git_helpers or self.ep is None:
            return None
        key = self._helper_key()
        cached = self.creds._helper_cache.get(key)
        if cached is not None:
            return cached
        found = gitcredential.fill(
            self.ep.scheme,
            self.ep.host_port,
            self.ep.path,
            username,
            env=self.creds.env,
            cwd=self._cwd(),
            timeout=min(gitcredential.FILL_TIMEOUT_S, self.creds.timeout_s),
        )
        if found is not None:
            self.creds._helper_cache[key] = found
        return found

    def _refused(self, given: _Given) -> str:
        what = "the login from git's credential helper" if given.helper is not None else given.label
        after = (
            "; thrum told the helper to forget it: log in again so that `git push` works, or set THRUM_GIT_TOKEN"
            if given.helper is not None
            else "; check the token, its expiry and its scopes (it needs read and write access)"
        )
        return f"{self._where()} refused {what} for user {given.user}{after}"

    # -- SSH

    def _next_ssh(self, user: str):
        if self._ssh_queue is None:
            self._ssh_queue = self._ssh_candidates(user)
        if not self._ssh_queue:
            raise AuthError(self._ssh_failed(user))
        label, make = self._ssh_queue.pop(0)
        self.tried.append(label)
        self.given = _Given(label, user)
        return make()

    def _ssh_candidates(self, user: str) -> list:
        c, ep = self.creds, self.ep
        home = c.home()
        out: list = []
        seen: set[str] = set()

        def key(path: str, why: str) -> None:
            path = os.path.expanduser(path)
            if path in seen or not os.path.exists(path):
                return
            seen.add(path)
            problem = key_file_problem(path, c.ssh_passphrase)
            if problem:
                self.skipped.append(f"{_short(path, home)} {problem}")
                return
            pub = path + ".pub" if os.path.exists(path + ".pub") else None
            out.append(
                (f"key {_short(path, home)} ({why})", lambda: pygit2.Keypair(user, pub, path, c.ssh_passphrase or ""))
            )

        if c.ssh_key_path:
            if not os.path.exists(c.ssh_key_path):
                self.skipped.append(f"{c.ssh_key_path} ({c.ssh_key_source}) does not exist")
            key(c.ssh_key_path, c.ssh_key_source)
        identities = ep.identity_files if ep else []
        if c.use_ssh_agent and not (ep and ep.identities_only and identities) and c.ssh_auth_sock():
            out.append(("ssh-agent", lambda: pygit2.KeypairFromAgent(user)))
        for path in identities:
            key(path, "IdentityFile in ~/.ssh/config")
        if not identities:
            for name in ("id_rsa", "id_ecdsa", "id_ed25519", "id_dsa"):
                key(os.path.join(home, ".ssh", name), "default key file")
        return out

    def _ssh_failed(self, user: str) -> str:
        where = self._where()
        if not self.tried:
            reason = "no SSH key to offer: no ssh-agent (SSH_AUTH_SOCK) and no usable key file"
        else:
            reason = "the server refused " + ", ".join(self.tried)
        if self.skipped:
            reason += "; skipped " + ", ".join(self.skipped)
        on = f" on {host_label(self.ep.host_port, self.ep.port)}" if self.ep is not None and self.ep.ssh_alias else ""
        return (
            f"SSH login to {where} as {user}{on} failed: {reason}; add your public key to the server's "
            f"account, or set THRUM_SSH_KEY to the key that works with `git push`"
        )

    def _host_key_message(self, hostname: str, port: int) -> str:
        label = host_label(hostname, port)
        files = known_hosts_files(self.creds.home())
        shown = _short(files[0], self.creds.home())
        ssh_cmd = f"ssh {'-p %d ' % port if port != 22 else ''}{self.ep.user + '@' if self.ep.user else ''}{hostname}"
        listed = known_host_entries(hostname, port, files)
        if listed:
            path, line, _ = listed[0]
            return (
                f"the SSH host key of {label} does not match {shown} (line {line}): the server's key changed, "
                f"or someone is intercepting the connection; if the change is expected, run "
                f"`ssh-keygen -R '{label}'` and then `{ssh_cmd}` to check and record the new key"
            )
        return (
            f"the SSH host key of {label} is not in {shown}, so the server cannot be verified; "
            f"run `{ssh_cmd}` once, check the fingerprint it shows and answer yes, then sync again"
        )

    # -- helpers

    def _where(self) -> str:
        ep = self.ep
        return f"remote {ep.remote_name} ({ep.display})" if ep else "the remote"

    def _cwd(self) -> str | None:
        return str(self.ep.base_dir) if self.ep is not None and self.ep.base_dir else None


def remote_callbacks(credentials: Credentials | None = None, endpoint: Endpoint | None = None) -> SyncCallbacks:
    """Fresh callbacks for one network operation (``endpoint`` binds them to a remote)."""
    return SyncCallbacks(credentials, endpoint)


# --- errors -------------------------------------------------------------------------

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

"""libgit2's side of one network operation: the logins handed over, the host key checked.

Rules:

1. Each login source (`credentials.Credentials`, in the order its rules give) is tried
   once per operation; the first one the server refuses ends the operation with one
   line naming the remote, the user and where the login came from. A login from git's
   credential helpers is approved or rejected by the outcome (`SyncCallbacks.settle`).
2. SSH host keys are checked against ``~/.ssh/known_hosts`` (libgit2 does the
   check; pygit2 would accept any key when asked): an unknown or changed key is
   refused with a message saying what to run (`failures.HostKeyRefused`). Never
   accepted silently.
3. A push's per-ref refusals are collected (``rejected``), not raised: whoever pushed
   tells a lost race from a refusal.
4. HTTPS, once a server accepted a login: the next operation on the same remote with the
   same login sends it with its first request, not after a 401 round trip (`httplogin`;
   only a digest of it is kept).
5. A push that may go only onto a known remote tip (``expected``) stops before anything is
   sent when the remote's ref is elsewhere (`push_negotiation`; push-first cycles).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pygit2
from pygit2.enums import CredentialType
from pygit2.errors import Passthrough
from pygit2.remotes import PushUpdate

from .. import AuthError, SyncError
from . import gitcredential, httplogin
from .credentials import Credentials, credentials_from_env, key_file_problem
from .endpoint import Endpoint
from .failures import HostKeyRefused
from .ssh import host_label, known_host_entries, known_hosts_files


__all__ = ["SyncCallbacks", "remote_callbacks"]

_Login = pygit2.Username | pygit2.UserPass | pygit2.Keypair
_SSH_TYPES = CredentialType.SSH_KEY | CredentialType.SSH_CUSTOM | CredentialType.SSH_MEMORY


def _short(path: str, home: str) -> str:
    return "~" + path[len(home) :] if home and path.startswith(home.rstrip("/") + "/") else path


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
        self.expected: dict[str, pygit2.Oid] = {}  # push only onto these remote tips (rule 5)
        self.given: _Given | None = None
        self.tried: list[str] = []
        self.skipped: list[str] = []
        self._ssh_queue: list[tuple[str, Callable[[], _Login]]] | None = None
        self._calls = 0
        self._login: tuple[str, str] | None = None  # the HTTPS login given (user, digest)

    # -- libgit2 hooks

    def credentials(self, url: str, username_from_url: str | None, allowed_types: CredentialType) -> _Login:
        self._calls += 1
        ep = self.ep
        if allowed_types & CredentialType.USERNAME:
            return pygit2.Username(username_from_url or (ep.user if ep else None) or "git")
        if allowed_types & _SSH_TYPES:
            return self._next_ssh(username_from_url or (ep.user if ep else None) or "git")
        if allowed_types & CredentialType.USERPASS_PLAINTEXT:
            return self._userpass(username_from_url)
        raise AuthError(f"{self._where()} asks for a kind of login thrum cannot give ({allowed_types!r})")

    def custom_headers(self) -> list[str] | None:
        """The login this remote accepted before, sent with the first request (rule 4)."""
        ep, c = self.ep, self.creds
        if ep is None or ep.kind != "http" or ep.url_password:
            return None
        helper = None
        if c.https_token:
            label, user, password = c.token_source, c.https_username or ep.url_user or "x-access-token", c.https_token
        else:
            helper = c.helper_cache.get(self._helper_key())  # asked earlier in this cycle
            if helper is None:
                return None
            label, user, password = "git's credential helper", helper.username, helper.password
        header = httplogin.preset(self._helper_key(), user, password)
        if header is not None:
            self.given = _Given(label, user, helper)  # a refusal now is this login's (`_userpass`)
            self._login = (user, httplogin.digest(user, password))
        return header

    def certificate_check(self, certificate: None, valid: bool, host: bytes) -> bool:
        if self.ep is None or self.ep.kind != "ssh":
            raise Passthrough  # TLS: libgit2's own verdict (the system's CAs)
        hostname = host.decode() if isinstance(host, bytes) else str(host)
        if valid:
            return True
        raise HostKeyRefused(self._host_key_message(hostname, self.ep.port))

    def push_update_reference(self, refname: str, message: str) -> None:
        if message:
            self.rejected.append((refname, message))

    def push_negotiation(self, updates: list[PushUpdate]) -> None:
        """A push that may go only onto a known tip (``expected``: ref -> oid) stops here,
        before anything is sent, when the remote's ref is elsewhere (rule 5); libgit2
        raises the error, which names a stale tip (a lost race to whoever pushed)."""
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
            self.creds.helper_cache.pop(self._helper_key(), None)

    # -- HTTPS

    def _userpass(self, username_from_url: str | None) -> _Login:
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

    def _helper_key(self) -> tuple[str, str, str] | None:
        ep = self.ep
        return (ep.scheme, ep.host_port, ep.path) if ep else None

    def _helper(self, username: str | None) -> gitcredential.GitCredential | None:
        if not self.creds.use_git_helpers or self.ep is None:
            return None
        key = self._helper_key()
        cached = self.creds.helper_cache.get(key)
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
            self.creds.helper_cache[key] = found
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

    def _next_ssh(self, user: str) -> _Login:
        if self._ssh_queue is None:
            self._ssh_queue = self._ssh_candidates(user)
        if not self._ssh_queue:
            raise AuthError(self._ssh_failed(user))
        label, make = self._ssh_queue.pop(0)
        self.tried.append(label)
        self.given = _Given(label, user)
        return make()

    def _ssh_candidates(self, user: str) -> list[tuple[str, Callable[[], _Login]]]:
        c, ep = self.creds, self.ep
        home = c.home()
        out: list[tuple[str, Callable[[], _Login]]] = []
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
        user = self.ep.user if self.ep is not None else None
        ssh_cmd = f"ssh {'-p %d ' % port if port != 22 else ''}{user + '@' if user else ''}{hostname}"
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

"""git's own credential helpers, through ``git credential fill|approve|reject``.

A user whose ``git push`` works has a credential helper set up (``store``, ``cache``,
libsecret, osxkeychain, the GitHub CLI's ``gh auth git-credential``, Git Credential
Manager). Asking ``git credential`` gives thrum the same login. This is the one
place the product runs the ``git`` executable, and only when it is installed.

Rules:

1. Never a prompt, never a hang: no terminal (``GIT_TERMINAL_PROMPT=0``), no
   askpass program (``GIT_ASKPASS`` fails at once), Git Credential Manager told not
   to be interactive, stdin closed after the request, and a time limit.
2. ``fill`` returns None when git is missing, no helper knows the host, or anything
   fails; the reason is logged, never raised: the caller reports "no credential".
3. After the network operation, ``approve`` (it worked: helpers may store it) or
   ``reject`` (the server refused it: helpers forget it), as git does.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

__all__ = ["GitCredential", "approve", "fill", "git_executable", "reject"]

FILL_TIMEOUT_S = 20.0


@dataclass
class GitCredential:
    """What ``git credential fill`` answered (all of it goes back to approve/reject)."""

    username: str
    password: str
    fields: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # never print the secret
        return f"GitCredential(username={self.username!r}, password=***)"


def git_executable() -> str | None:
    return shutil.which("git")


def _env(base: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_ASKPASS"] = "false"  # a failing askpass: git gives up instead of asking anyone
    env.pop("SSH_ASKPASS", None)
    env["GCM_INTERACTIVE"] = "never"
    env.setdefault("LC_ALL", "C")
    return env


def _request(description: dict[str, str | None]) -> bytes:
    lines = [f"{k}={v}" for k, v in description.items() if v is not None and "\n" not in str(v)]
    return ("\n".join(lines) + "\n\n").encode()


def _run(
    action: str, description: dict[str, str | None], env: dict[str, str] | None, cwd: str | None, timeout: float
) -> subprocess.CompletedProcess[bytes] | None:
    git = git_executable()
    if git is None:
        return None
    try:
        return subprocess.run(
            [git, "credential", action],
            input=_request(description),
            capture_output=True,
            env=_env(env),
            cwd=cwd if cwd and os.path.isdir(cwd) else None,
            timeout=timeout,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        log.warning("git credential %s did not answer within %.0f s; ignoring it", action, timeout)
    except OSError as exc:
        log.warning("cannot run git credential %s: %s", action, exc)
    return None


def fill(
    protocol: str,
    host: str,
    path: str | None = None,
    username: str | None = None,
    *,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    timeout: float = FILL_TIMEOUT_S,
) -> GitCredential | None:
    """The credential git's helpers hold for ``protocol://host/path``, or None."""
    description: dict[str, str | None] = {
        "protocol": protocol,
        "host": host,
        "path": (path or "").lstrip("/") or None,
        "username": username,
    }
    proc = _run("fill", description, env, cwd, timeout)
    if proc is None:
        return None
    if proc.returncode != 0:
        log.info("git credential fill found nothing for %s://%s (exit %d)", protocol, host, proc.returncode)
        return None
    answer: dict[str, str] = {}
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        key, eq, value = line.partition("=")
        if eq:
            answer[key] = value
    if not answer.get("password"):
        return None
    merged = {**{k: v for k, v in description.items() if v is not None}, **answer}
    return GitCredential(username=answer.get("username", username or ""), password=answer["password"], fields=merged)


def approve(cred: GitCredential, *, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
    """Tell the helpers the credential worked (they may store it)."""
    _run("approve", dict(cred.fields), env, cwd, FILL_TIMEOUT_S)


def reject(cred: GitCredential, *, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
    """Tell the helpers the server refused the credential (they forget it)."""
    _run("reject", dict(cred.fields), env, cwd, FILL_TIMEOUT_S)

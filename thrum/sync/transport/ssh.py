"""SSH as the user has it configured: OpenSSH's own answer for a host, and ``known_hosts``.

libgit2 talks SSH through libssh2, which reads neither ``~/.ssh/config`` nor anything
but ``~/.ssh/known_hosts``. So OpenSSH is asked what it would do (``ssh -G HOST``:
its whole config language, ``Match`` and ``Include`` included, evaluated by itself),
and ``known_hosts`` is read here only to tell an unknown host from a changed key
when libgit2 refuses one. Rules:

1. ``ssh -G [-l USER] [-p PORT] -- HOST`` gives the real host name, port, user,
   identity files and ``IdentitiesOnly``. A user or port written in the URL is passed
   on, so it wins over the config as with ``ssh user@host``. Identity files are
   printed unexpanded: ``~`` and ``%d %h %n %p %r %u`` are expanded here. When no
   identity file is configured OpenSSH lists its defaults; those are not reported as
   configured (the login tries the default key files anyway).
2. OpenSSH reads the account's home (``getpwuid``), not ``$HOME``. When thrum is told
   another home (``HOME`` of the command that asked for the sync), ssh is pointed at
   that home's ``.ssh/config`` (``-F``; ``/dev/null`` when there is none), which
   skips ``/etc/ssh/ssh_config`` (and OpenSSH still reads a relative ``Include``
   from the account's ``~/.ssh``).
3. A host name that is not a plain host (empty, starting with ``-``, holding spaces or
   control characters) never reaches ssh. Without ``ssh`` on PATH, the URL is used as
   written (with the local login name). A config OpenSSH refuses is a `SyncError`
   with ssh's own line. Answers are remembered for `CACHE_S` seconds per host, user,
   port, home and config modification times (a sync must not start a process each time).
4. ``known_hosts`` lines match by plain or hashed (``|1|salt|hash``) host names, with
   ``[host]:port`` for ports other than 22; ``@revoked`` and ``@cert-authority``
   lines are not host keys.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import hmac
import logging
import os
import pwd
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import SyncError

log = logging.getLogger(__name__)

__all__ = ["SshTarget", "host_label", "known_host_entries", "known_hosts_files", "resolve_host"]

SYSTEM_CONFIG = "/etc/ssh/ssh_config"
DEFAULT_IDENTITIES = ("id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_xmss", "id_dsa")
CACHE_S = 60.0
TIMEOUT_S = 10.0
_PLAIN_HOST = re.compile(r"[A-Za-z0-9_.:%\[\]-]{1,255}")
_cache: dict[tuple[object, ...], tuple[float, "SshTarget"]] = {}


@dataclass
class SshTarget:
    """Where ``ssh <alias>`` really connects, and with which identities."""

    alias: str
    hostname: str
    port: int = 22
    user: str = ""
    identity_files: list[str] = field(default_factory=list)  # configured ones, ~ and %-tokens expanded
    identities_only: bool = False


def _home(home: str | os.PathLike[str] | None) -> str:
    return os.fspath(home) if home is not None else os.path.expanduser("~")


def _local_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in this environment
        return "git"


def _account_home() -> str | None:
    try:
        return pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        return None


def _expand(value: str, *, home: str, hostname: str, alias: str, user: str, port: int, local_user: str) -> str:
    tokens = {"%": "%", "d": home, "h": hostname, "n": alias, "r": user, "p": str(port), "u": local_user}
    value = re.sub(r"%(.)", lambda m: tokens.get(m.group(1), m.group(0)), value)
    if value.startswith("~"):
        value = os.path.join(home, value[2:]) if value.startswith("~/") else os.path.expanduser(value)
    return value


def _config_args(home: str) -> list[str]:
    """``-F`` when thrum's home is not the one OpenSSH reads (rule 2)."""
    account = _account_home()
    if account is not None and os.path.realpath(account) == os.path.realpath(home):
        return []
    own = os.path.join(home, ".ssh", "config")
    return ["-F", own if os.path.isfile(own) else os.devnull]


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _ask_openssh(ssh: str, alias: str, url_user: str | None, url_port: int | None, home: str) -> dict[str, list[str]]:
    argv = [ssh, *_config_args(home), "-G"]
    if url_user:
        argv += ["-l", url_user]
    if url_port:
        argv += ["-p", str(url_port)]
    argv += ["--", alias]
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT_S, check=False, env=_ssh_env(home)
        )
    except subprocess.TimeoutExpired:
        raise SyncError(
            f"`ssh -G {alias}` did not answer within {TIMEOUT_S:.0f}s (a Match exec in ~/.ssh/config?)"
        ) from None
    except OSError as exc:
        raise SyncError(f"cannot run `ssh -G {alias}` ({exc.strerror or exc})") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        why = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise SyncError(f"OpenSSH cannot resolve the SSH host {alias} (`ssh -G {alias}`: {why}); check ~/.ssh/config")
    options: dict[str, list[str]] = {}
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(" ")
        if key:
            options.setdefault(key.lower(), []).append(value.strip())
    return options


def _ssh_env(home: str) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = home
    env["LC_ALL"] = "C"
    return env


def _is_default_identity(path: str) -> bool:
    return path.startswith("~/.ssh/") and path[len("~/.ssh/") :] in DEFAULT_IDENTITIES


def resolve_host(
    alias: str,
    *,
    url_user: str | None = None,
    url_port: int | None = None,
    home: str | os.PathLike[str] | None = None,
) -> SshTarget:
    """What OpenSSH makes of ``alias`` (see the module rules).

    Raises:
        SyncError: ``alias`` is not a plain host name, or OpenSSH refused its config.
    """
    home = _home(home)
    local_user = _local_user()
    if not _PLAIN_HOST.fullmatch(alias) or alias.startswith("-"):
        raise SyncError(f"{alias!r} is not an SSH host name thrum passes to ssh")
    ssh = shutil.which("ssh")
    if ssh is None:  # rule 3: the URL as written
        return SshTarget(alias, alias, url_port or 22, url_user or local_user)
    key = (
        ssh,
        alias,
        url_user,
        url_port,
        home,
        local_user,
        _mtime(os.path.join(home, ".ssh", "config")),
        _mtime(SYSTEM_CONFIG),
    )
    cached = _cache.get(key)
    if cached is not None and time.monotonic() - cached[0] < CACHE_S:
        return cached[1]
    options = _ask_openssh(ssh, alias, url_user, url_port, home)

    def first(name: str, default: str) -> str:
        values = options.get(name)
        return values[0] if values and values[0] else default

    hostname = first("hostname", alias)
    try:
        port = int(first("port", str(url_port or 22)))
    except ValueError:
        port = url_port or 22
    user = first("user", url_user or local_user)
    files = [p for p in options.get("identityfile", []) if p and p.lower() != "none"]
    if all(_is_default_identity(p) for p in files):
        files = []  # OpenSSH's defaults: nothing was configured (rule 1)
    identities = [
        _expand(p, home=home, hostname=hostname, alias=alias, user=user, port=port, local_user=local_user)
        for p in files
    ]
    target = SshTarget(
        alias=alias,
        hostname=hostname,
        port=port,
        user=user,
        identity_files=identities,
        identities_only=first("identitiesonly", "no").lower() == "yes",
    )
    if len(_cache) > 256:
        _cache.clear()
    _cache[key] = (time.monotonic(), target)
    return target


# --- known_hosts --------------------------------------------------------------------


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def _wildcard(name: str, pattern: str) -> bool:
    """OpenSSH wildcards: ``*`` and ``?`` only (``[`` is a plain character, as in ``[host]:port``)."""
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern.lower())
    return re.fullmatch(regex, name.lower(), re.DOTALL) is not None


def host_label(hostname: str, port: int) -> str:
    """The name known_hosts files use: ``host``, or ``[host]:port`` off port 22."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


def _hashed_match(pattern: str, name: str) -> bool:
    try:
        _, magic, salt, digest = pattern.split("|")
        if magic != "1":
            return False
        mac = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
        return hmac.compare_digest(mac, base64.b64decode(digest))
    except (ValueError, TypeError):
        return False


def _entry_matches(hosts_field: str, name: str) -> bool:
    matched = False
    for pat in hosts_field.split(","):
        if pat.startswith("|"):
            if _hashed_match(pat, name):
                matched = True
            continue
        negated = pat.startswith("!")
        p = pat[1:] if negated else pat
        if _wildcard(name, p):
            if negated:
                return False
            matched = True
    return matched


def known_host_entries(hostname: str, port: int, files: list[str]) -> list[tuple[str, int, str]]:
    """(file, line number, key type) of each host key listed for ``hostname:port``."""
    name = host_label(hostname, port)
    found = []
    for path in files:
        for n, raw in enumerate(_read_lines(path), 1):
            fields = raw.split()
            if not fields or fields[0].startswith("#"):
                continue
            if fields[0].startswith("@"):  # @revoked / @cert-authority: not a host key
                continue
            if len(fields) >= 3 and _entry_matches(fields[0], name):
                found.append((path, n, fields[1]))
    return found


def known_hosts_files(home: str | os.PathLike[str] | None = None) -> list[str]:
    """The file libssh2 (through libgit2) checks host keys against."""
    return [str(Path(_home(home)) / ".ssh" / "known_hosts")]

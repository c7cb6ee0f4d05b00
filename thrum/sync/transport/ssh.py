"""SSH as the user has it configured: ``~/.ssh/config`` host aliases and ``known_hosts``.

libgit2 talks SSH through libssh2, which reads neither ``~/.ssh/config`` nor anything
but ``~/.ssh/known_hosts``. So this module resolves what OpenSSH would (pure, no
pygit2): the real host name, port, user and identity files of a host alias, and
whether ``known_hosts`` lists a host at all (to tell an unknown host from a changed
key when libgit2 refuses the key).

Rules:

1. Files: ``~/.ssh/config``, then ``/etc/ssh/ssh_config``; for each option the first
   value obtained wins, except ``IdentityFile``, which accumulates (OpenSSH's rules).
   ``Host`` patterns (``*``, ``?``, ``!negation``) and ``Include`` (globs, relative to
   ``~/.ssh``) are followed; of ``Match`` only ``all``, ``host``, ``originalhost``,
   ``user`` and ``localuser`` are understood, any other ``Match`` block is skipped.
2. A user or port written in the URL wins over the config, like ``ssh user@host``.
   With no user anywhere, the local login name is used, as ``ssh`` does.
3. ``known_hosts`` lines match by plain or hashed (``|1|salt|hash``) host names, with
   ``[host]:port`` for ports other than 22; ``@revoked`` and ``@cert-authority``
   lines are not host keys.
"""

from __future__ import annotations

import base64
import getpass
import glob
import hashlib
import hmac
import logging
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["SshTarget", "host_label", "known_host_entries", "known_hosts_files", "resolve_host"]

SYSTEM_CONFIG = "/etc/ssh/ssh_config"
DEFAULT_IDENTITIES = ("id_rsa", "id_ecdsa", "id_ed25519", "id_dsa")
_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*(?:=\s*|\s+)(.*?)\s*$")
_MAX_INCLUDE_DEPTH = 16


@dataclass
class SshTarget:
    """Where ``ssh <alias>`` really connects, and with which identities."""

    alias: str
    hostname: str
    port: int = 22
    user: str = ""
    identity_files: list[str] = field(default_factory=list)  # from the config, ~ expanded
    identities_only: bool = False
    configured: bool = False  # some config block matched this alias

    def default_identity_files(self, home: str) -> list[str]:
        return [os.path.join(home, ".ssh", name) for name in DEFAULT_IDENTITIES]


def _home(home: str | os.PathLike[str] | None) -> str:
    return os.fspath(home) if home is not None else os.path.expanduser("~")


def _local_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in this environment
        return "git"


def _split(rest: str) -> list[str]:
    try:
        return shlex.split(rest, comments=True)
    except ValueError:
        return rest.split()


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


def _match_patterns(name: str, patterns: list[str]) -> bool:
    """OpenSSH pattern lists: any positive match and no negated match."""
    name = name.lower()
    matched = False
    for pat in patterns:
        for p in pat.split(","):
            negated = p.startswith("!")
            p = p[1:] if negated else p
            if p and _wildcard(name, p):
                if negated:
                    return False
                matched = True
    return matched


class _Resolver:
    def __init__(self, alias: str, home: str, local_user: str, url_user: str | None):
        self.alias = alias
        self.home = home
        self.local_user = local_user
        self.url_user = url_user
        self.options: dict[str, str] = {}
        self.identities: list[str] = []
        self.configured = False

    def read(self, path: str, depth: int = 0) -> None:
        active = True  # options before the first Host/Match apply to every host
        for raw in _read_lines(path):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            m = _LINE.match(line)
            if not m:
                continue
            key, args = m.group(1).lower(), _split(m.group(2))
            if key == "host":
                active = _match_patterns(self.alias, args)
                self.configured |= active and args != ["*"]
            elif key == "match":
                active = self._match(args)
                self.configured |= active
            elif not active:
                continue
            elif key == "include":
                if depth >= _MAX_INCLUDE_DEPTH:
                    log.warning("ssh config: Include nested too deeply in %s", path)
                    continue
                for pattern in args:
                    pattern = os.path.expanduser(pattern)
                    if not os.path.isabs(pattern):
                        pattern = os.path.join(self.home, ".ssh", pattern)
                    for included in sorted(glob.glob(pattern)):
                        self.read(included, depth + 1)
            elif key == "identityfile":
                if args and args[0].lower() != "none":
                    self.identities.append(args[0])
            elif args:
                self.options.setdefault(key, args[0])

    def _match(self, args: list[str]) -> bool:
        if [a.lower() for a in args] == ["all"]:
            return True
        i = 0
        while i < len(args):
            criterion = args[i].lower()
            if criterion == "all":
                i += 1
                continue
            if i + 1 >= len(args):
                return False
            value = args[i + 1].split(",")
            if criterion in ("host", "originalhost"):
                subject = self.alias if criterion == "originalhost" else self.options.get("hostname", self.alias)
            elif criterion == "user":
                subject = self.url_user or self.options.get("user") or self.local_user
            elif criterion == "localuser":
                subject = self.local_user
            else:  # exec, canonical, final, tagged, …: not evaluated; skip the block
                return False
            if not _match_patterns(subject, value):
                return False
            i += 2
        return True


def _expand(value: str, *, home: str, hostname: str, alias: str, user: str, port: int, local_user: str) -> str:
    tokens = {"%": "%", "d": home, "h": hostname, "n": alias, "r": user, "p": str(port), "u": local_user}
    value = re.sub(r"%(.)", lambda m: tokens.get(m.group(1), m.group(0)), value)
    if value.startswith("~"):
        value = os.path.join(home, value[2:]) if value.startswith("~/") else os.path.expanduser(value)
    return value


def resolve_host(
    alias: str,
    *,
    url_user: str | None = None,
    url_port: int | None = None,
    home: str | os.PathLike[str] | None = None,
    config_files: list[str] | None = None,
    local_user: str | None = None,
) -> SshTarget:
    """What OpenSSH's config makes of ``alias`` (see the module rules)."""
    home = _home(home)
    local_user = local_user or _local_user()
    files = config_files if config_files is not None else [os.path.join(home, ".ssh", "config"), SYSTEM_CONFIG]
    r = _Resolver(alias, home, local_user, url_user)
    for path in files:
        r.read(path)
    hostname_opt = r.options.get("hostname", alias)
    hostname = (
        _expand(hostname_opt, home=home, hostname=alias, alias=alias, user="", port=22, local_user=local_user)
        if "%" in hostname_opt
        else hostname_opt
    )
    port = url_port
    if port is None:
        try:
            port = int(r.options.get("port", "22"))
        except ValueError:
            port = 22
    user = url_user or r.options.get("user") or local_user
    identities = [
        _expand(p, home=home, hostname=hostname, alias=alias, user=user, port=port, local_user=local_user)
        for p in r.identities
    ]
    return SshTarget(
        alias=alias,
        hostname=hostname,
        port=port,
        user=user,
        identity_files=identities,
        identities_only=r.options.get("identitiesonly", "no").lower() == "yes",
        configured=r.configured,
    )


# --- known_hosts --------------------------------------------------------------------


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

"""The team's trust root: the committed file that names the admins, the log and the admission policy.

Rules (docs/design/trust.md, "The team root"):

1. The root is ``thrum-team.toml`` at the top of the repository, as committed on the
   project's normal branch (`thrum.sync.teamfile` finds it); an edit on a side branch,
   or one not committed, does not count. It changes through ordinary commits and code
   review, so the forge's branch protection guards it.
2. It is untrusted input like anything in a checkout: at most `MAX_BYTES`, TOML, and a
   strict schema — exactly the keys below, names by the agent-name rule, keys as
   ``agent.register`` carries them. Anything else is one `TeamRootError` line.
3. Schema (version 1)::

       version = 1
       log_id = "log_<ULID>"        # the log this root governs (signatures cover it)
       policy = "admins"            # or "open"
       [admins]                     # name = public key (base64 of 32 bytes): at least one
       alice = "…"
       [members]                    # optional: agents admitted when the root was written
       bob = "…"

   ``policy = "admins"``: only admitted agents may register (admins, members, and
   names an admin admits). ``"open"``: anyone may register (trust on first use), but
   team management is still the admins' (trust.md states the rule per event type).

Pure: no trio, no pygit2, no files.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

from ..errors import ThrumError
from ..events.names import is_name
from .keys import PublicKey, decode_public

FILE_NAME = "thrum-team.toml"
MAX_BYTES = 64 * 1024
VERSION = 1
POLICIES = ("admins", "open")
MAX_ENTRIES = 1000
LOG_ID_RE = re.compile(r"log_[0-9A-HJKMNP-TV-Z]{26}")

__all__ = [
    "FILE_NAME",
    "MAX_BYTES",
    "POLICIES",
    "TeamRoot",
    "TeamRootError",
    "new_log_id",
    "parse_team_root",
    "render_team_root",
]


class TeamRootError(ThrumError):
    """The team root file cannot be used (the message is one line naming the problem)."""

    code = -32602


@dataclass(frozen=True)
class TeamRoot:
    """A parsed root. ``admins`` and ``members`` map names to keys; admins are members too."""

    log_id: str
    policy: str
    admins: dict[str, PublicKey]
    members: dict[str, PublicKey] = field(default_factory=dict)
    version: int = VERSION

    def is_admin(self, name: str, key: PublicKey | None = None) -> bool:
        held = self.admins.get(name)
        return held is not None and (key is None or held == key)

    def admitted_key(self, name: str) -> PublicKey | None:
        """The key the root itself admits ``name`` with (admins first), or None."""
        return self.admins.get(name) or self.members.get(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "log_id": self.log_id,
            "policy": self.policy,
            "admins": {n: k.b64 for n, k in sorted(self.admins.items())},
            "members": {n: k.b64 for n, k in sorted(self.members.items())},
        }


def new_log_id() -> str:
    from ..events.ids import new_ulid

    return f"log_{new_ulid()}"


def parse_team_root(text: str | bytes) -> TeamRoot:
    """The root in ``text`` (the file's content).

    Raises:
        TeamRootError: too large, not UTF-8, not TOML, or not the schema (one line).
    """
    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            raise _bad(f"it is {len(text)} bytes; at most {MAX_BYTES} are read")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise _bad("it is not UTF-8") from None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise _bad(f"it is larger than {MAX_BYTES} bytes")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _bad(f"not valid TOML ({_one_line(str(exc))})") from None
    allowed = {"version", "log_id", "policy", "admins", "members"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise _bad(f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    version = data.get("version")
    if type(version) is not int:
        raise _bad("'version' must be an integer (1)")
    if version > VERSION:
        raise _bad(f"version {version} is newer than this thrum understands ({VERSION}); upgrade thrum")
    if version < 1:
        raise _bad(f"version {version} is not a version")
    log_id = data.get("log_id")
    if not isinstance(log_id, str) or not LOG_ID_RE.fullmatch(log_id):
        raise _bad("'log_id' must be \"log_\" followed by a ULID (thrum team init writes one)")
    policy = data.get("policy")
    if policy not in POLICIES:
        raise _bad(f"'policy' must be one of {', '.join(repr(p) for p in POLICIES)}")
    admins = _keys(data.get("admins"), "admins")
    if not admins:
        raise _bad("[admins] must name at least one agent")
    members = _keys(data.get("members", {}), "members")
    for name, key in admins.items():
        if name in members and members[name] != key:
            raise _bad(f"{name!r} is listed with two different keys in [admins] and [members]")
    return TeamRoot(log_id=log_id, policy=policy, admins=admins, members=members, version=version)


def render_team_root(root: TeamRoot) -> str:
    """The file's text for ``root`` (what `thrum team init` writes)."""
    lines = [
        '# The thrum team root (docs/design/trust.md, "The team root").',
        "# Commit it on the project's normal branch; it counts only once committed there.",
        f"version = {root.version}",
        f'log_id = "{root.log_id}"',
        f'policy = "{root.policy}"',
        "",
        "[admins]",
        *(f'{name} = "{key.b64}"' for name, key in sorted(root.admins.items())),
    ]
    members = {n: k for n, k in root.members.items() if n not in root.admins}
    if members:
        lines += ["", "[members]", *(f'{name} = "{key.b64}"' for name, key in sorted(members.items()))]
    return "\n".join(lines) + "\n"


def _keys(table: object, what: str) -> dict[str, PublicKey]:
    if not isinstance(table, dict):
        raise _bad(f'[{what}] must be a table of name = "public key"')
    if len(table) > MAX_ENTRIES:
        raise _bad(f"[{what}] lists more than {MAX_ENTRIES} agents")
    out: dict[str, PublicKey] = {}
    for name, value in table.items():
        if not is_name(name):
            raise _bad(f"[{what}] {str(name)[:80]!r} is not an agent name (lowercase letters, digits, _)")
        try:
            out[name] = decode_public(value)
        except ValueError as exc:
            raise _bad(f"[{what}] {name}: {exc}") from None
    return out


def _bad(why: str) -> TeamRootError:
    return TeamRootError(f"{FILE_NAME}: {why}")


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]

"""Agent identity files and how a command finds out who is acting.

An identity is one JSON file, ``.thrum/identities/{name}.json``::

    {"name": "alice", "role": "implementer", "module": "auth",
     "display": "Alice", "created_at": "2026-02-03T10:00:00Z", "worktree": "/src/app"}

Rules:

1. Names match ``[a-z0-9_]+`` (at most 64 characters) and are not reserved
   (daemon, system, thrum, all, broadcast): `thrum.events.names`, the one rule
   the daemon and the log share. Roles follow the same pattern.
   An agent's name differs from its role: both are addresses (``@alice``,
   ``@implementer``) and must not shadow each other.
2. Resolution order (spec/messaging-cli.md "Agent Identity"), first hit wins:

   1. ``THRUM_NAME`` selects the identity file of that name;
   2. ``THRUM_ROLE`` (with ``THRUM_MODULE`` if set) selects the identity with
      that role and module;
   3. the CLI flags ``--name`` / ``--role`` / ``--module`` do the same;
   4. a single identity file is selected automatically; with several, the one
      registered from the current checkout (``worktree``) if exactly one is.

   A selector that matches nothing, or several, is an `IdentityError` that
   lists the candidates and says how to choose.

Pure module: no daemon, no click; only the files under ``.thrum/identities``.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from .errors import IdentityError, ValidationError
from .events.names import NAME_RE, UNUSABLE_NAMES, check_name

MAX_MODULE = 256
MAX_DISPLAY = 256

QUICKSTART_HINT = "thrum quickstart --name NAME --role ROLE --module MODULE"


_FIELDS = ("name", "role", "module", "display", "created_at", "worktree")


class Identity:
    """One agent identity (immutable). A plain class, not a dataclass: this module is
    on every command's start-up path and the dataclass machinery costs a millisecond."""

    __slots__ = _FIELDS
    name: str
    role: str
    module: str
    display: str
    created_at: str
    worktree: str

    def __init__(
        self, name: str, role: str, module: str = "", display: str = "", created_at: str = "", worktree: str = ""
    ) -> None:
        for key, value in zip(_FIELDS, (name, role, module, display, created_at, worktree)):
            object.__setattr__(self, key, value)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"Identity is immutable (tried to set {key})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.to_dict().values()))

    def __repr__(self) -> str:
        return "Identity(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in _FIELDS) + ")"

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _FIELDS}

    @property
    def label(self) -> str:
        """``@alice (implementer, auth)`` for lists and error messages."""
        extra = ", ".join(x for x in (self.role, self.module) if x)
        return f"@{self.name} ({extra})" if extra else f"@{self.name}"


# --------------------------------------------------------------------------- validation


def check_identity(name: str, role: str, module: str = "", display: str = "") -> None:
    """Validate the fields of a new identity.

    Raises:
        ValidationError: naming the first bad field.
    """
    check_name(name)
    if not isinstance(role, str) or not NAME_RE.fullmatch(role):
        raise ValidationError(f"invalid role {role!r}: use lowercase letters, digits and _ (at most 64)", field="role")
    if role in UNUSABLE_NAMES:
        raise ValidationError(f"{role!r} is a reserved name; choose another role", field="role")
    if name == role:
        raise ValidationError(
            f"agent name and role are both {name!r}: they must differ (e.g. --name {name}_1 --role {role})",
            field="name",
        )
    if len(module or "") > MAX_MODULE or any(c.isspace() for c in (module or "")):
        raise ValidationError(f"invalid module {module!r}: no spaces, at most {MAX_MODULE} characters", field="module")
    if len(display or "") > MAX_DISPLAY:
        raise ValidationError(f"display name longer than {MAX_DISPLAY} characters", field="display")


# --------------------------------------------------------------------------- files


def identity_path(identities_dir: Path, name: str) -> Path:
    return Path(identities_dir) / f"{check_name(name)}.json"


def load(path: Path) -> Identity:
    """Read one identity file.

    Raises:
        IdentityError: unreadable, not JSON, or missing name/role.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IdentityError(f"no identity file {path}") from None
    except (OSError, ValueError) as exc:
        raise IdentityError(
            f"identity file {path} is unreadable ({exc}); delete it and run `{QUICKSTART_HINT}` again"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not isinstance(data.get("role"), str):
        raise IdentityError(f"identity file {path} has no name/role; delete it and run `{QUICKSTART_HINT}` again")

    def text(key: str) -> str:
        value = data.get(key)
        return value if isinstance(value, str) else ""

    return Identity(
        name=data["name"],
        role=data["role"],
        module=text("module"),
        display=text("display"),
        created_at=text("created_at"),
        worktree=text("worktree"),
    )


def list_identities(identities_dir: Path) -> list[Identity]:
    """Every readable identity in the directory, sorted by name (broken files are skipped)."""
    d = Path(identities_dir)
    if not d.is_dir():
        return []
    out = []
    for path in sorted(d.glob("*.json")):
        try:
            ident = load(path)
        except IdentityError:
            continue
        if path.stem == ident.name:
            out.append(ident)
    return out


def write(identities_dir: Path, ident: Identity) -> Path:
    """Create or replace an identity file atomically; returns its path."""
    check_identity(ident.name, ident.role, ident.module, ident.display)
    if not ident.created_at:
        ident = Identity(**{**ident.to_dict(), "created_at": now_rfc3339()})
    d = Path(identities_dir)
    d.mkdir(parents=True, exist_ok=True)
    path = identity_path(d, ident.name)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(ident.to_dict(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def register_params(ident: Identity, checkout: os.PathLike[str] | str) -> dict[str, Any]:
    """``agent.register`` params for ``ident`` acting from ``checkout`` (the repository root):
    what every front end sends (CLI, MCP server, hooks), so none of them differs.

    ``worktree`` is the worktree's name (``main`` or a linked worktree's name), never the
    identity file's local path: registrations are replicated to every clone, and the
    daemon refuses a path (issue 30, item 2: an MCP server that sent the path retried
    for ever).
    """
    from .paths import worktree_name

    params = {"name": ident.name, "role": ident.role}
    for key in ("module", "display"):
        if getattr(ident, key):
            params[key] = getattr(ident, key)
    params["worktree"] = worktree_name(checkout)
    return params


def remove(identities_dir: Path, name: str) -> bool:
    """Delete the identity file of ``name``; False when there was none."""
    try:
        identity_path(identities_dir, name).unlink()
        return True
    except FileNotFoundError:
        return False


def now_rfc3339() -> str:
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- resolution


def _names(idents: list[Identity]) -> str:
    return ", ".join(i.label for i in idents) if idents else "none"


def _select(idents: list[Identity], role: str | None, module: str | None, source: str) -> Identity:
    matches = [i for i in idents if (not role or i.role == role) and (not module or i.module == module)]
    wanted = " ".join(x for x in (f"role={role}" if role else "", f"module={module}" if module else "") if x)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise IdentityError(
            f"no agent identity with {wanted} (from {source}); known identities: {_names(idents)}; "
            f"register one with `{QUICKSTART_HINT}`"
        )
    raise IdentityError(
        f"{len(matches)} agent identities match {wanted} (from {source}): {_names(matches)}; "
        f"choose one with THRUM_NAME=<name> or --name <name>"
    )


def _by_name(identities_dir: Path, name: str, source: str) -> Identity:
    if not NAME_RE.fullmatch(name or ""):
        raise IdentityError(f"{source} {name!r} is not a valid agent name (lowercase letters, digits and _)")
    path = Path(identities_dir) / f"{name}.json"
    if not path.is_file():
        known = list_identities(identities_dir)
        raise IdentityError(
            f"no identity file for {source} {name!r} ({path}); known identities: {_names(known)}; "
            f"register it with `thrum quickstart --name {name} --role ROLE --module MODULE`"
        )
    return load(path)


def resolve(
    identities_dir: Path,
    *,
    name: str | None = None,
    role: str | None = None,
    module: str | None = None,
    env: Mapping[str, str] | None = None,
    worktree: str | Path | None = None,
) -> Identity:
    """Find the acting identity (rules in the module docstring).

    ``name``/``role``/``module`` are the CLI flags; ``env`` defaults to ``os.environ``;
    ``worktree`` is the current checkout, used to break ties in step 4.

    Raises:
        IdentityError: nothing or several match; the message lists the candidates.
    """
    env = os.environ if env is None else env
    env_name = (env.get("THRUM_NAME") or "").strip()
    env_role = (env.get("THRUM_ROLE") or "").strip()
    env_module = (env.get("THRUM_MODULE") or "").strip()

    if env_name:
        return _by_name(identities_dir, env_name, "THRUM_NAME")
    if env_role or env_module:
        return _select(list_identities(identities_dir), env_role or None, env_module or None, "THRUM_ROLE/THRUM_MODULE")
    if name:
        return _by_name(identities_dir, name, "--name")
    if role or module:
        return _select(list_identities(identities_dir), role, module, "--role/--module")

    idents = list_identities(identities_dir)
    if len(idents) == 1:
        return idents[0]
    if not idents:
        raise IdentityError(f"no agent identity in this repository; register one with `{QUICKSTART_HINT}`")
    if worktree is not None:
        here = str(worktree)
        local = [i for i in idents if i.worktree == here]
        if len(local) == 1:
            return local[0]
    raise IdentityError(
        f"{len(idents)} agent identities in this repository: {_names(idents)}; "
        f"choose one with THRUM_NAME=<name> or --name <name>"
    )

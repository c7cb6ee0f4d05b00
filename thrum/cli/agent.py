"""``thrum quickstart``, ``thrum whoami`` and ``thrum agent list|delete|cleanup``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from .. import identity as identity_mod
from ..errors import ThrumError, Unavailable
from .common import CONTEXT_SETTINGS, Runtime, global_options, runtime
from .render.directory import render_agents, render_identity
from .render.text import at, plural

if TYPE_CHECKING:
    from ..paths import ThrumPaths


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--display", default="", metavar="TEXT", help="Human-friendly display name.")
@click.option("--invite", default="", metavar="CODE", help="Redeem an admin's invite code (thrum team invite).")
@global_options()
def quickstart(display: str, invite: str) -> None:
    """Register this agent and start its session.

    Needs --name NAME and --role ROLE (or THRUM_NAME / THRUM_ROLE); --module is
    optional. Writes .thrum/identities/NAME.json, registers the agent with the
    daemon and starts a session.

    \b
    Example:
      thrum quickstart --name alice --role implementer --module auth --display "Alice"
    """
    rt = runtime()
    opts = rt.opts
    name = opts.name or os.environ.get("THRUM_NAME", "").strip()
    role = opts.role or os.environ.get("THRUM_ROLE", "").strip()
    module = opts.module or os.environ.get("THRUM_MODULE", "").strip()
    if not name or not role:
        missing = " and ".join(f for f, v in (("--name NAME", name), ("--role ROLE", role)) if not v)
        raise click.UsageError(f"quickstart needs {missing}")
    register_agent(rt, name, role, module, display, invite=invite)


def register_agent(
    rt: Runtime, name: str, role: str, module: str = "", display: str = "", *, invite: str = ""
) -> dict[str, Any]:
    """Write the identity file, register the agent, start its session, print a summary.

    Used by ``quickstart`` and by the interactive ``init``.
    """
    identity_mod.check_identity(name, role, module, display)
    paths = rt.require_init()

    created_at = ""
    try:
        created_at = identity_mod.load(paths.identities / f"{name}.json").created_at
    except ThrumError:
        pass
    ident = identity_mod.Identity(
        name=name,
        role=role,
        module=module,
        display=display,
        created_at=created_at or identity_mod.now_rfc3339(),
        worktree=str(paths.repo),
    )
    params = identity_mod.register_params(ident, paths.repo)
    if invite:
        params["invite"] = invite
    registered = rt.call("agent.register", params)
    path = identity_mod.write(paths.identities, ident)
    rt._identity = ident
    session = rt.agent_call("session.start", {})

    result = {
        "identity": ident.to_dict(),
        "identity_file": str(path),
        "agent": registered.get("agent"),
        "created": registered.get("created"),
        "updated": registered.get("updated"),
        "session": session,
    }

    def text() -> str:
        verb = (
            "registered"
            if registered.get("created", True)
            else ("updated" if registered.get("updated") else "already registered")
        )
        details = ", ".join(f"{k}: {v}" for k, v in (("role", role), ("module", module)) if v)
        try:
            shown = path.relative_to(paths.repo)
        except ValueError:
            shown = path
        lines = [
            f"> Agent {verb}: @{name} ({details})",
            f"  Identity: {shown}",
            f"  Session:  {session.get('session_id')}",
        ]
        return "\n".join(lines)

    rt.emit(result, text)
    others = [i for i in identity_mod.list_identities(paths.identities) if i.name != name]
    if others and not _found_here(paths, name):
        rt.hint(
            f"Several agents share this repository: set THRUM_NAME={name} in this agent's environment "
            f"(or pass --name {name})."
        )
    rt.hint('Next: thrum send "Hello" --to @everyone   ·   thrum inbox')
    return result


def _found_here(paths: ThrumPaths, name: str) -> bool:
    """Whether this checkout finds ``name`` without THRUM_NAME (a linked worktree's own agent)."""
    from .. import identity as identity_mod
    from ..errors import IdentityError

    try:
        return identity_mod.resolve(paths.identities, env={}, worktree=str(paths.repo)).name == name
    except IdentityError:
        return False


@click.command(context_settings=CONTEXT_SETTINGS)
@global_options()
def whoami() -> None:
    """Show the agent identity this shell acts as (and its session)."""
    rt = runtime()
    ident = rt.identity()
    session: dict[str, Any] | None = None
    try:
        found = rt.call(
            "session.list", {"caller": ident.name, "agent": ident.name, "active_only": True}, autostart=False
        )
        active = [s for s in found.get("sessions") or [] if s.get("active", True)]
        session = active[0] if active else {}
    except Unavailable:
        session = None
    except ThrumError as exc:
        rt.debug(f"session.list failed: {exc}")
        session = None
    result = {**ident.to_dict(), "session": session}
    rt.emit(result, lambda: render_identity(ident.to_dict(), session))


@click.group(context_settings=CONTEXT_SETTINGS)
@global_options()
def agent() -> None:
    """Registered agents: list, delete, cleanup."""


@agent.command("list", context_settings=CONTEXT_SETTINGS)
@click.option("--role", metavar="ROLE", help="Only agents with this role.")
@click.option("--module", metavar="MODULE", help="Only agents working on this module.")
@click.option("--all", "all_", is_flag=True, help="Include deleted agents.")
@global_options(exclude=("role", "module"))
def list_(role: str | None, module: str | None, all_: bool) -> None:
    """List registered agents."""
    rt = runtime()
    params: dict[str, Any] = {}
    if role:
        params["role"] = role.lstrip("@")
    if module:
        params["module"] = module
    if all_:
        params["include_deleted"] = True
    result = rt.call("agent.list", params)
    me = None
    try:
        me = rt.identity().name
    except ThrumError:
        pass
    rt.emit(result, lambda: render_agents(result.get("agents") or [], me=me))


@agent.command("delete", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--reason", metavar="TEXT", help="Why the agent is removed.")
@click.option("--force", is_flag=True, help="Needed to delete another agent than the one acting.")
@global_options()
def delete(name: str, reason: str | None, force: bool) -> None:
    """Delete agent NAME (and its identity file here, if any).

    Deleting another agent needs --force, and the removal names who did it. An agent
    deleted while its key is on some machine comes back when it next acts there.
    """
    rt = runtime()
    name = name.lstrip("@")
    params = {"name": name, "force": bool(force)}
    if reason:
        params["reason"] = reason
    try:
        params["caller"] = rt.identity().name
    except ThrumError:
        pass  # no identity chosen here: the daemon picks the actor (the agent itself, or the only one)
    result = rt.call("agent.delete", params)
    removed_file = _remove_identity(rt, name)
    by = result.get("deleted_by")
    text = f"> Agent deleted: @{name}" + (f" (by @{by})" if by and by != name else "")
    rt.emit(result, text + ("\n  Removed its identity file" if removed_file else ""))


def _remove_identity(rt: Runtime, name: str) -> bool:
    try:
        return identity_mod.remove(rt.paths.identities, name)
    except (ThrumError, OSError):
        return False


@agent.command("cleanup", context_settings=CONTEXT_SETTINGS)
@click.option("--force", is_flag=True, help="Really remove them (default: only list the candidates).")
@click.option(
    "--days",
    "older_than_days",
    type=click.IntRange(0, None),
    default=None,
    metavar="N",
    help="Agents not seen for N days are candidates (daemon default: 7).",
)
@global_options()
def cleanup(force: bool, older_than_days: int | None) -> None:
    """Find agents not seen for a while; remove them with --force."""
    rt = runtime()
    params: dict[str, Any] = {"force": bool(force)}
    if older_than_days is not None:
        params["older_than_days"] = older_than_days
    result = rt.call("agent.cleanup", params)
    candidates = result.get("candidates") or []
    removed = result.get("removed") or []
    for name in removed:
        _remove_identity(rt, name)

    def text() -> str:
        if force:
            if not removed:
                return "No stale agents to remove."
            return f"> Removed {plural(len(removed), 'agent')}: " + ", ".join(at(n) for n in removed)
        if not candidates:
            return "No stale agents."
        return (
            f"Would remove {plural(len(candidates), 'agent')}: "
            + ", ".join(at(n) for n in candidates)
            + ("" if rt.opts.quiet else "\n  Run `thrum agent cleanup --force` to remove them.")
        )

    rt.emit(result, text)


@agent.command("rotate-key", context_settings=CONTEXT_SETTINGS)
@global_options()
def rotate_key() -> None:
    """Give this agent a new key, announced with its old one.

    Lines signed with the old key after the rotation no longer count on any replica;
    earlier ones stay valid. The old key file is kept beside the new one
    (.thrum/identities/NAME.key.retired-…). A key that was stolen should also be
    revoked from when it was stolen: thrum team revoke NAME --since TIME.
    """
    rt = runtime()
    result = rt.agent_call("agent.rotate_key", {})
    rt.emit(
        result,
        f"> @{result['agent_id']} now signs with key {result['public_key'][:12]}… "
        f"(the old key {result['old_key'][:12]}… counts no more after this point)",
    )

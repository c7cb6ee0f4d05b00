"""``thrum group create|delete|add|remove|list|info|members``."""

from __future__ import annotations

from typing import Any

import click

from .common import CONTEXT_SETTINGS, bare_address, global_options, runtime
from .render.directory import render_group_info, render_groups, render_members


@click.group(context_settings=CONTEXT_SETTINGS)
@global_options()
def group() -> None:
    """Groups: address several agents and roles as one @name.

    \b
    Examples:
      thrum group create reviewers --description "Code review team"
      thrum group add reviewers @alice
      thrum group add reviewers --role reviewer
      thrum send "PR ready for review" --to @reviewers
    """


@group.command("create", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--description", default="", metavar="TEXT", help="What the group is for.")
@global_options()
def create(name: str, description: str) -> None:
    """Create a group NAME."""
    rt = runtime()
    params = {"name": bare_address(name)}
    if description:
        params["description"] = description
    result = rt.agent_call("group.create", params)
    rt.emit(result, f"> Group created: @{bare_address(name)}")


@group.command("delete", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@global_options()
def delete(name: str) -> None:
    """Delete group NAME (@everyone cannot be deleted)."""
    rt = runtime()
    result = rt.agent_call("group.delete", {"name": bare_address(name)})
    rt.emit(result, f"> Group deleted: @{bare_address(name)}")


def _member(member: str | None, role: str | None, verb: str) -> tuple[str, str]:
    if role and member:
        raise click.UsageError(f"give an agent (@name) or --role ROLE to {verb}, not both")
    if role:
        return "role", bare_address(role)
    if not member:
        raise click.UsageError(f"give the member to {verb}: @name, or --role ROLE")
    name = bare_address(member)
    if not name:
        raise click.UsageError(f"invalid member {member!r}")
    return "agent", name


def _member_label(kind: str, value: str) -> str:
    return f"role {value}" if kind == "role" else f"@{value}"


@group.command("add", context_settings=CONTEXT_SETTINGS)
@click.argument("group_name", metavar="GROUP")
@click.argument("member", required=False, metavar="[@MEMBER]")
@click.option("--role", "role", metavar="ROLE", help="Add every agent with this role (resolved when read).")
@global_options(exclude=("role",))
def add(group_name: str, member: str | None, role: str | None) -> None:
    """Add an agent (@name) or a role (--role ROLE) to GROUP."""
    rt = runtime()
    kind, value = _member(member, role, "add")
    g = bare_address(group_name)
    result = rt.agent_call("group.member.add", {"group": g, "member": value, "member_type": kind})
    rt.emit(result, f"> Added {_member_label(kind, value)} to @{g}")


@group.command("remove", context_settings=CONTEXT_SETTINGS)
@click.argument("group_name", metavar="GROUP")
@click.argument("member", required=False, metavar="[@MEMBER]")
@click.option("--role", "role", metavar="ROLE", help="Remove this role member.")
@global_options(exclude=("role",))
def remove(group_name: str, member: str | None, role: str | None) -> None:
    """Remove an agent (@name) or a role (--role ROLE) from GROUP."""
    rt = runtime()
    kind, value = _member(member, role, "remove")
    g = bare_address(group_name)
    result = rt.agent_call("group.member.remove", {"group": g, "member": value, "member_type": kind})
    rt.emit(result, f"> Removed {_member_label(kind, value)} from @{g}")


@group.command("list", context_settings=CONTEXT_SETTINGS)
@global_options()
def list_() -> None:
    """List all groups."""
    rt = runtime()
    result = rt.call("group.list", {})
    rt.emit(result, lambda: render_groups(result.get("groups") or []))


@group.command("info", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@global_options()
def info(name: str) -> None:
    """Show a group's details and members."""
    rt = runtime()
    result = rt.call("group.info", {"name": bare_address(name)})
    rt.emit(result, lambda: render_group_info(result.get("group") or result))


@group.command("members", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--expand", is_flag=True, help="Resolve roles and groups to the agents they hold now.")
@global_options()
def members(name: str, expand: bool) -> None:
    """List the members of group NAME."""
    rt = runtime()
    params: dict[str, Any] = {"name": bare_address(name)}
    if expand:
        params["expand"] = True
    result = rt.call("group.members", params)
    rt.emit(result, lambda: render_members(result))

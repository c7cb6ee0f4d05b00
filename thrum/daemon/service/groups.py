"""group.* methods. Membership is resolved at read time; @everyone is built in."""

from __future__ import annotations

from typing import Any

from ... import errors
from ... import events as ev
from ...store import addresses, directory
from ..dispatch import Call, method


def _bare(value: str) -> str:
    return value[1:] if value.startswith("@") else value


def _group_name(call: Call, key: str = "name") -> str:
    name = _bare(call.params.str(key, required=True))
    if not ev.NAME_RE.fullmatch(name):
        raise errors.ValidationError(
            f"invalid params: {key} {name[:60]!r}: group names use lowercase letters, digits and _", field=key
        )
    return name


async def _require_group(call: Call, name: str) -> dict[str, Any]:
    try:
        return await call.ctx.store.read(directory.group_info, name)
    except errors.NotFound:
        raise errors.NotFound(f"group @{name} not found (see `thrum group list`)") from None


@method("group.create")
async def create(call: Call) -> dict[str, Any]:
    p = call.params
    caller = await call.ctx.agents.caller(p)
    name = _group_name(call)
    if name == "everyone":
        raise errors.Conflict("@everyone is built in")
    hit = await call.ctx.store.read(addresses.resolve_address, name)
    if hit is not None:
        kind = {"group": "a group", "agent": "an agent", "role": "a role"}.get(hit[0], hit[0])
        raise errors.Conflict(f"@{name} already names {kind}")
    event = ev.GroupCreate(name=name, description=p.str("description", default="", max_len=1024), created_by=caller)
    await call.ctx.store.write([event])
    return {"group": await call.ctx.store.read(directory.group_info, name)}


@method("group.delete")
async def delete(call: Call) -> dict[str, Any]:
    caller = await call.ctx.agents.caller(call.params)
    name = _group_name(call)
    if name == "everyone":
        raise errors.Forbidden("the built-in group @everyone cannot be deleted")
    await _require_group(call, name)
    await call.ctx.store.write([ev.GroupDelete(name=name, deleted_by=caller)])
    return {"name": name, "deleted": True}


@method("group.list")
async def list_groups(call: Call) -> dict[str, Any]:
    return {"groups": await call.ctx.store.read(directory.list_groups)}


@method("group.info")
async def info(call: Call) -> dict[str, Any]:
    return {"group": await _require_group(call, _group_name(call))}


@method("group.members")
async def members(call: Call) -> dict[str, Any]:
    name = _group_name(call)
    await _require_group(call, name)
    expand = call.params.bool("expand")
    result = await call.ctx.store.read(directory.group_members, name, expand=expand)
    if expand:
        return {"group": name, "agents": [m["value"] for m in result]}
    return {"group": name, "members": result}


async def _member_change(call: Call, add: bool) -> dict[str, Any]:
    p = call.params
    caller = await call.ctx.agents.caller(p)
    group = _group_name(call, "group")
    if group == "everyone":
        raise errors.Forbidden("members of @everyone are implicit: every registered agent")
    await _require_group(call, group)
    member_type = p.str("member_type", default="agent", choices=ev.MEMBER_TYPES)
    member = _bare(p.str("member", required=True))
    if not ev.NAME_RE.fullmatch(member):
        raise errors.ValidationError(f"invalid params: member {member[:60]!r} is not a valid name", field="member")
    current = await call.ctx.store.read(directory.group_members, group, expand=False)
    is_member = any(m["type"] == member_type and m["value"] == member for m in current)
    if add:
        if member_type == "agent" and await call.ctx.agents.get(member, refresh=True) is None:
            known = await call.ctx.store.read(addresses.resolve_address, member)
            if known is not None:  # a role or a group: never "did you mean" the name itself
                raise _not_an_agent(group, member, known[0])
            close = await call.ctx.store.read(addresses.close_matches, member)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise errors.NotFound(f"agent @{member} not found{hint} (use --role to add a role)")
        if is_member:
            return {"group": group, "member_type": member_type, "member": member, "changed": False}
        event: ev.Event = ev.GroupMemberAdd(group=group, member_type=member_type, member_value=member, agent_id=caller)
    else:
        if not is_member:
            raise errors.NotFound(f"{'role ' if member_type == 'role' else '@'}{member} is not a member of @{group}")
        event = ev.GroupMemberRemove(group=group, member_type=member_type, member_value=member, agent_id=caller)
    await call.ctx.store.write([event])
    return {"group": group, "member_type": member_type, "member": member, "changed": True}


def _not_an_agent(group: str, member: str, kind: str) -> errors.ThrumError:
    """``@member`` names something known that is no agent: a group (itself included), or a role."""
    if member == group:
        return errors.ValidationError(f"invalid params: a group cannot hold itself (@{group})", field="member")
    if kind == "role":
        return errors.ValidationError(
            f"invalid params: @{member} is a role; add it with --role {member}", field="member"
        )
    return errors.ValidationError(
        f"invalid params: @{member} is a group; a group holds agents and roles, not other groups", field="member"
    )


@method("group.member.add")
async def member_add(call: Call) -> dict[str, Any]:
    return await _member_change(call, True)


@method("group.member.remove")
async def member_remove(call: Call) -> dict[str, Any]:
    return await _member_change(call, False)

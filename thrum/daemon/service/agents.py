"""agent.* methods: registration, listing, deletion, cleanup of orphans."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ... import errors
from ... import events as ev
from ...store import directory
from ..dispatch import Call, method

_FIELDS = ("role", "module", "display", "kind", "worktree")


@method("agent.register")
async def register(call: Call) -> dict:
    p = call.params
    name = p.str("name", required=True)
    ev.check_name(name, "name")
    role = p.str("role", required=True)
    if not ev.NAME_RE.fullmatch(role):
        raise errors.ValidationError(f"invalid params: role {role[:60]!r}: use lowercase letters, digits and _",
                                     field="role")
    if role == name:
        raise errors.ValidationError(f"invalid params: agent name {name!r} must differ from its role", field="name")
    fields = {
        "role": role,
        "module": p.str("module", default="", max_len=256),
        "display": p.str("display", default="", max_len=256),
        "kind": p.str("kind", default="agent", choices=ev.AGENT_KINDS),
        "worktree": p.str("worktree", default="", max_len=1024),
    }
    if await call.ctx.read(directory.resolve_address, name) == ("group", name):
        raise errors.Conflict(f"{name!r} is already the name of a group; choose another agent name")
    existing = await call.ctx.agent(name, refresh=True)
    if existing is not None and all(existing.get(k, "") == v for k, v in fields.items()):
        return {"agent": existing, "created": False, "updated": False}
    await call.ctx.write([ev.AgentRegister(agent_id=name, name=name, **fields)])
    info = await call.ctx.agent(name, refresh=True)
    return {"agent": info, "created": existing is None, "updated": existing is not None}


@method("agent.list")
async def list_agents(call: Call) -> dict:
    p = call.params
    return await call.ctx.read(directory.list_agents, role=p.str("role"), module=p.str("module"),
                                 include_deleted=p.bool("include_deleted"))


@method("agent.get")
async def get(call: Call) -> dict:
    name = call.params.str("name", required=True)
    info = await call.ctx.agent(name, refresh=True)
    if info is None:
        raise errors.NotFound(f"agent {name!r} not found")
    return {"agent": info}


async def _delete(call: Call, names: list[str], reason: str, how: str) -> None:
    events = []
    for name in names:
        for s in await call.ctx.read(directory.list_sessions, name, active_only=True):
            events.append(ev.SessionEnd(session_id=s["session_id"], agent_id=name, reason="normal"))
        events.append(ev.AgentCleanup(agent_id=name, reason=reason, method=how))
    await call.ctx.write(events)
    for name in names:
        call.ctx.forget_agent(name)


@method("agent.delete")
async def delete(call: Call) -> dict:
    p = call.params
    name = p.str("name", required=True)
    if await call.ctx.agent(name, refresh=True) is None:
        raise errors.NotFound(f"agent {name!r} not found")
    await _delete(call, [name], p.str("reason", default="manual deletion", max_len=1024), "manual")
    return {"agent_id": name, "deleted": True}


MAX_AGE_DAYS = 36_500  # a century: any older cutoff is before every agent (and before datetime's range)


@method("agent.cleanup")
async def cleanup(call: Call) -> dict:
    p = call.params
    days = p.number("older_than_days", default=7.0, minimum=0, maximum=MAX_AGE_DAYS)
    cutoff = (datetime.now(timezone.utc) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.999Z")
    candidates = await call.ctx.read(directory.stale_agents, cutoff)
    removed: list[str] = []
    if p.bool("force") and candidates:
        await _delete(call, candidates, f"no activity for {days:g} days", "automated")
        removed = candidates
    return {"candidates": candidates, "removed": removed, "older_than_days": days}

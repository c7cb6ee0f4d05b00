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
    elsewhere = call.ctx.trusted_key(name)
    if not call.ctx.has_key(name) and elsewhere is not None:
        raise errors.Conflict(
            f"agent {name!r} is already registered from another machine, with its own key; choose another "
            f"name, or copy .thrum/identities/{name}.json and {name}.key from that machine to act as it here")
    public_key, new_key = await call.ctx.ensure_key(name)
    if existing is not None and not new_key and all(existing.get(k, "") == v for k, v in fields.items()):
        return {"agent": existing, "created": False, "updated": False}
    await call.ctx.write([ev.AgentRegister(agent_id=name, name=name, public_key=public_key, **fields)])
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


async def _actor(call: Call, target: str | None = None) -> str:
    """Who removes agents (and signs the removal): ``caller``, else the agent itself when
    its key is here, else this machine's only identity."""
    if call.params.str("caller"):
        actor = await call.ctx.caller(call.params)
        if not call.ctx.has_key(actor):
            raise errors.IdentityError(f"agent {actor!r} has no key on this machine; act as one of its identities")
        return actor
    if target and call.ctx.has_key(target):
        return target
    local = call.ctx.local_agents()
    if len(local) == 1:
        return local[0]
    raise errors.ValidationError(
        "invalid params: caller is required: name the agent who removes others "
        f"(this machine has {len(local)} identities{': ' + ', '.join(local[:10]) if local else ''})",
        field="caller")


async def _delete(call: Call, names: list[str], reason: str, how: str, actor: str) -> None:
    events = []
    for name in names:
        if call.ctx.has_key(name):  # another machine's agent ends its own sessions
            for s in await call.ctx.read(directory.list_sessions, name, active_only=True):
                events.append(ev.SessionEnd(session_id=s["session_id"], agent_id=name, reason="normal"))
        events.append(ev.AgentCleanup(agent_id=name, reason=reason, method=how,
                                      by="" if actor == name else actor))
    await call.ctx.write(events)
    for name in names:
        call.ctx.forget_agent(name)


@method("agent.delete")
async def delete(call: Call) -> dict:
    p = call.params
    name = p.str("name", required=True)
    if await call.ctx.agent(name, refresh=True) is None:
        raise errors.NotFound(f"agent {name!r} not found")
    actor = await _actor(call, name)
    await _delete(call, [name], p.str("reason", default="manual deletion", max_len=1024), "manual", actor)
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
        await _delete(call, candidates, f"no activity for {days:g} days", "automated", await _actor(call))
        removed = candidates
    return {"candidates": candidates, "removed": removed, "older_than_days": days}

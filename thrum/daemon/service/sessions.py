"""session.* methods. Sessions end on request, on daemon stop, or as crashed when orphaned."""

from __future__ import annotations

from typing import Any

from ... import errors
from ... import events as ev
from ...store import directory, prefixes
from ..dispatch import Call, method


async def _active(call: Call, agent: str) -> list[dict[str, Any]]:
    return await call.ctx.store.read(directory.list_sessions, agent, active_only=True)


@method("session.start")
async def start(call: Call) -> dict[str, Any]:
    agent = await call.ctx.agents.caller(call.params)
    ends = [
        ev.SessionEnd(session_id=s["session_id"], agent_id=agent, reason="normal") for s in await _active(call, agent)
    ]
    begin = ev.SessionStart(agent_id=agent)
    await call.ctx.store.write(ends + [begin])
    for e in ends:
        call.ctx.sessions.ended(agent, e.session_id)
    await call.ctx.sessions.adopt(agent, begin.session_id)
    return {"session_id": begin.session_id, "agent_id": agent, "started_at": begin.timestamp}


@method("session.end")
async def end(call: Call) -> dict[str, Any]:
    p = call.params
    agent = await call.ctx.agents.caller(p)
    reason = p.str("reason", default="normal", choices=ev.END_REASONS)
    sid = p.str("session_id")
    if sid is not None:  # a unique prefix works, like message ids
        sid = await call.ctx.store.read(prefixes.complete_id, "session", sid[:100], field="session_id")
    active = await _active(call, agent)
    if sid is None:
        if not active:
            raise errors.NotFound(f"{agent} has no active session")
        sid = active[0]["session_id"]
    elif sid not in {s["session_id"] for s in active}:
        raise errors.NotFound(f"session {sid} is not an active session of {agent}")
    end_event = ev.SessionEnd(session_id=sid, agent_id=agent, reason=reason)
    await call.ctx.store.write([end_event])
    call.ctx.sessions.ended(agent, sid)
    return {"session_id": sid, "agent_id": agent, "ended_at": end_event.timestamp, "reason": reason}


@method("session.list")
async def list_sessions(call: Call) -> dict[str, Any]:
    p = call.params
    agent = p.str("agent") or p.str("caller")
    sessions = await call.ctx.store.read(directory.list_sessions, agent, active_only=p.bool("active_only"))
    return {"sessions": sessions}


@method("session.heartbeat")
async def heartbeat(call: Call) -> dict[str, Any]:
    p = call.params
    agent = await call.ctx.agents.caller(p)
    sid = await call.ctx.sessions.ensure(agent, p.str("session_id"))
    # Seeing the agent (`caller`) is all: a heartbeat event follows when one is due
    # (thrum.daemon.presence); nothing is written for this call itself.
    return {"session_id": sid, "agent_id": agent, "last_seen_at": ev.now_rfc3339()}

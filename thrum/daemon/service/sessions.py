"""session.* methods. Sessions end on request, on daemon stop, or as crashed when orphaned."""

from __future__ import annotations

from ... import errors
from ... import events as ev
from ...store import directory, queries
from ..dispatch import Call, method


async def _active(call: Call, agent: str) -> list[dict]:
    return await call.store.read(directory.list_sessions, agent, active_only=True)


@method("session.start")
async def start(call: Call) -> dict:
    agent = await call.daemon.caller(call.params)
    ends = [ev.SessionEnd(session_id=s["session_id"], agent_id=agent, reason="normal")
            for s in await _active(call, agent)]
    begin = ev.SessionStart(agent_id=agent)
    await call.store.write(ends + [begin])
    for e in ends:
        call.daemon.session_ended(agent, e.session_id)
        if call.daemon.hub is not None:
            call.daemon.hub.session_ended(e.session_id)
    await call.daemon.adopt_session(agent, begin.session_id)
    return {"session_id": begin.session_id, "agent_id": agent, "started_at": begin.timestamp}


@method("session.end")
async def end(call: Call) -> dict:
    p = call.params
    agent = await call.daemon.caller(p)
    reason = p.str("reason", default="normal", choices=ev.END_REASONS)
    sid = p.str("session_id")
    active = await _active(call, agent)
    if sid is None:
        if not active:
            raise errors.NotFound(f"{agent} has no active session")
        sid = active[0]["session_id"]
    elif sid not in {s["session_id"] for s in active}:
        raise errors.NotFound(f"session {sid} is not an active session of {agent}")
    end_event = ev.SessionEnd(session_id=sid, agent_id=agent, reason=reason)
    await call.store.write([end_event])
    call.daemon.session_ended(agent, sid)
    if call.daemon.hub is not None:
        call.daemon.hub.session_ended(sid)
    return {"session_id": sid, "agent_id": agent, "ended_at": end_event.timestamp, "reason": reason}


@method("session.list")
async def list_sessions(call: Call) -> dict:
    p = call.params
    agent = p.str("agent") or p.str("caller")
    sessions = await call.store.read(directory.list_sessions, agent, active_only=p.bool("active_only"))
    return {"sessions": sessions}


def _touch(db, agent: str, sid: str, now: str) -> None:
    db.execute_sql("UPDATE sessions SET last_seen_at=? WHERE session_id=?", (now, sid))
    db.execute_sql("UPDATE agents SET last_seen_at=? WHERE agent_id=?", (now, agent))


@method("session.heartbeat")
async def heartbeat(call: Call) -> dict:
    p = call.params
    agent = await call.daemon.caller(p)
    sid = await call.daemon.ensure_session(agent, p.str("session_id"))
    now = ev.now_rfc3339()
    await call.store.read(_touch, agent, sid, now)
    return {"session_id": sid, "agent_id": agent, "last_seen_at": now}

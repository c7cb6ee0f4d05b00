"""The directory views of the CLI: agents, an identity, sessions, groups and their members.

Pure (no I/O): ``now`` is passed in. Lists are aligned tables (`text.table`);
an empty list is one sentence (the spec's text).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .text import at, clean, relative_time, table


def render_agents(agents: list[dict[str, Any]], *, now: datetime | None = None, me: str | None = None) -> str:
    if not agents:
        return "No agents registered."
    rows = []
    for a in agents:
        name = a.get("name") or a.get("agent_id") or "?"
        status = str(a.get("status") or "offline")  # the daemon's, one definition (thrum.presence)
        if a.get("deleted"):
            by = a.get("deleted_by")
            status = f"deleted by {at(str(by))}" if by and by != name else "deleted"
        rows.append(
            [
                at(name) + (" (you)" if me and name == me else ""),
                a.get("role"),
                a.get("module"),
                a.get("display"),
                status,
                relative_time(a.get("last_seen_at"), now) if a.get("last_seen_at") else "-",
            ]
        )
    return table(["AGENT", "ROLE", "MODULE", "DISPLAY", "STATUS", "LAST SEEN"], rows)


def render_identity(
    ident: dict[str, Any], session: dict[str, Any] | None = None, *, now: datetime | None = None
) -> str:
    lines = [
        f"Agent:   {at(ident.get('name'))}",
        f"Role:    {ident.get('role') or '-'}",
        f"Module:  {ident.get('module') or '-'}",
    ]
    if ident.get("display"):
        lines.append(f"Display: {clean(ident['display'])}")
    if session:
        lines.append(f"Session: {session.get('session_id')} (started {relative_time(session.get('started_at'), now)})")
    elif session is not None:
        lines.append("Session: none active")
    return "\n".join(lines)


def render_sessions(sessions: list[dict[str, Any]], *, now: datetime | None = None) -> str:
    if not sessions:
        return "No sessions."
    rows = []
    for s in sessions:
        status = "active" if s.get("active") or not s.get("ended_at") else (s.get("end_reason") or "ended")
        rows.append(
            [
                s.get("session_id"),
                at(s.get("agent_id")),
                relative_time(s.get("started_at"), now),
                relative_time(s.get("ended_at"), now) if s.get("ended_at") else "-",
                status,
            ]
        )
    return table(["SESSION", "AGENT", "STARTED", "ENDED", "STATUS"], rows)


def member_text(member: Any) -> str:
    if isinstance(member, dict):
        kind = member.get("type") or member.get("member_type") or "agent"
        value = member.get("value") or member.get("member_value") or member.get("member") or "?"
    else:
        kind, value = "agent", str(member)
    return at(value) if kind == "agent" else f"{kind}:{value}"


def render_groups(groups: list[dict[str, Any]]) -> str:
    if not groups:
        return "No groups."
    rows = []
    for g in groups:
        desc = g.get("description") or ""
        if g.get("builtin"):
            desc = (desc + " (built-in)").strip()
        count = g.get("member_count")
        rows.append([at(g.get("name")), "-" if count is None else str(count), desc])
    return table(["GROUP", "MEMBERS", "DESCRIPTION"], rows)


def render_group_info(group: dict[str, Any], *, now: datetime | None = None) -> str:
    lines = [f"Group: {at(group.get('name'))}"]
    if group.get("description"):
        lines.append(f"  Description: {clean(group['description'])}")
    if group.get("builtin"):
        lines.append("  Built-in:    yes (all registered agents; cannot be deleted)")
    if group.get("created_at") or group.get("created_by"):
        created = relative_time(group.get("created_at"), now) if group.get("created_at") else ""
        by = f" by {at(group['created_by'])}" if group.get("created_by") else ""
        lines.append(f"  Created:     {created}{by}".rstrip())
    members = group.get("members")
    if members is not None:
        lines.append("  Members:     " + (", ".join(member_text(m) for m in members) if members else "none"))
    return "\n".join(lines)


def render_members(result: dict[str, Any]) -> str:
    if "agents" in result:
        agents = result.get("agents") or []
        return (
            "\n".join(
                at((a.get("name") or a.get("value") or a.get("agent_id")) if isinstance(a, dict) else a) for a in agents
            )
            or "No members."
        )
    members = result.get("members") or []
    return "\n".join(member_text(m) for m in members) or "No members."

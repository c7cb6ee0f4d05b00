"""The read side of the projection for who is who: agents, sessions, groups, addresses.

Rules (shared with `thrum.store.queries`):

1. Every function takes the peewee ``SqliteDatabase`` first, uses raw SQL, and
   returns plain JSON-able values.
2. An agent is live while its latest ``agent.register`` is newer than its latest
   ``agent.cleanup``; a group exists while its latest create is newer than its
   latest delete; a member counts when its latest event is an add newer than the
   group's latest create. ``everyone`` is built in: every live agent.
"""

from __future__ import annotations

from typing import Any, TypedDict

import peewee as pw

from ..errors import NotFound
from .sql import Row, all_rows, one_row

EVERYONE = "everyone"
EVERYONE_DESCRIPTION = "All registered agents"

LIVE_GROUP = "g.event_id IS NOT NULL AND (g.deleted_event_id IS NULL OR g.event_id > g.deleted_event_id)"
LIVE_MEMBER = "gm.state = 'add' AND gm.event_id > g.event_id"
LIVE_AGENT = "a.role IS NOT NULL AND (a.cleanup_event_id IS NULL OR a.cleanup_event_id < a.event_id)"
_ISSUES = "sum(coalesce(count, 1))"  # a fold_issues row is one line, or a count of them (store/issues.py)


def bare_name(name: str | None) -> str:
    """``@alice`` → ``alice``; anything else as it is (None → "")."""
    return name[1:] if isinstance(name, str) and name.startswith("@") else (name or "")


class Member(TypedDict):
    """A group member as `group_members` gives it: ``type`` "agent" or "role"."""

    type: str
    value: str


class SessionOwner(TypedDict):
    """Whose a session is, and when it ended (None: it has not)."""

    agent_id: str
    ended_at: str | None


# --------------------------------------------------------------------------- agents, sessions


def _agent_item(row: Row) -> dict[str, Any]:
    (agent_id, kind, name, role, module, worktree, display, registered_at, last_seen_at, deleted, active, by) = row
    item: dict[str, Any] = {
        "agent_id": agent_id,
        "kind": kind or "agent",
        "role": role or "",
        "module": module or "",
        "display": display or "",
        "registered_at": registered_at or "",
        "last_seen_at": last_seen_at or "",
        "name": name or agent_id,
        "worktree": worktree or "",
        "active_sessions": active,
        "deleted": bool(deleted),
    }
    if deleted:
        item["deleted_by"] = by or agent_id  # a removal names who did it (issue 30)
    return item


_AGENT_SELECT = (
    "SELECT a.agent_id, a.kind, a.name, a.role, a.module, a.worktree, a.display, a.registered_at, "
    f"a.last_seen_at, NOT ({LIVE_AGENT}), (SELECT count(*) FROM sessions s WHERE s.agent_id = a.agent_id "
    "AND s.started_at IS NOT NULL AND s.ended_at IS NULL), a.cleanup_by FROM agents a WHERE a.role IS NOT NULL"
)


def list_agents(
    db: pw.SqliteDatabase, role: str | None = None, module: str | None = None, include_deleted: bool = False
) -> dict[str, Any]:
    """spec agent.list: ``{"agents": [...]}`` sorted by name; deleted agents (cleanup
    newer than their latest register) only with ``include_deleted``."""
    sql = _AGENT_SELECT
    params: list[str] = []
    if role:
        sql += " AND a.role = ?"
        params.append(role)
    if module:
        sql += " AND a.module = ?"
        params.append(module)
    if not include_deleted:
        sql += f" AND {LIVE_AGENT}"
    return {"agents": [_agent_item(r) for r in all_rows(db, sql + " ORDER BY a.agent_id", params)]}


def get_agent(db: pw.SqliteDatabase, name: str, *, include_deleted: bool = False) -> dict[str, Any] | None:
    """One agent.list item, or None when unknown (or deleted, unless ``include_deleted``)."""
    sql = _AGENT_SELECT + " AND a.agent_id = ?" + ("" if include_deleted else f" AND {LIVE_AGENT}")
    row = one_row(db, sql, (bare_name(name),))
    return _agent_item(row) if row else None


def registration_floor(db: pw.SqliteDatabase, name: str) -> str | None:
    """The latest event id among ``name``'s applied registration and removal: a new
    registration must sort after it to count (None: neither was ever applied)."""
    row = one_row(db, "SELECT event_id, cleanup_event_id FROM agents WHERE agent_id = ?", (name,))
    ids = [x for x in (row or ()) if x]
    return max(ids) if ids else None


def live_agents(db: pw.SqliteDatabase, role: str | None = None) -> list[str]:
    sql = f"SELECT a.agent_id FROM agents a WHERE {LIVE_AGENT}"
    params: list[str] = []
    if role:
        sql += " AND a.role = ?"
        params.append(role)
    return [r[0] for r in all_rows(db, sql + " ORDER BY a.agent_id", params)]


def list_sessions(db: pw.SqliteDatabase, agent: str | None = None, active_only: bool = False) -> list[dict[str, Any]]:
    """Sessions (oldest first); ``active``: started and not ended."""
    return _sessions(db, agent=agent, active_only=active_only)


def sessions_named(db: pw.SqliteDatabase, sid: str) -> list[dict[str, Any]]:
    """Every agent's row of session id ``sid`` (one, unless another agent's events name it too)."""
    return _sessions(db, sid=sid)


def _sessions(
    db: pw.SqliteDatabase, *, agent: str | None = None, sid: str | None = None, active_only: bool = False
) -> list[dict[str, Any]]:
    sql = "SELECT session_id, agent_id, started_at, ended_at, end_reason, last_seen_at FROM sessions WHERE 1"
    params: list[str] = []
    if sid:
        sql += " AND session_id = ?"
        params.append(sid)
    if agent:
        sql += " AND agent_id = ?"
        params.append(agent)
    if active_only:
        sql += " AND started_at IS NOT NULL AND ended_at IS NULL"
    return [
        {
            "session_id": sid,
            "agent_id": a or "",
            "started_at": s or "",
            "ended_at": e or "",
            "end_reason": why or "",
            "last_seen_at": seen or "",
            "active": s is not None and e is None,
        }
        for sid, a, s, e, why, seen in all_rows(db, sql + " ORDER BY started_at, session_id, agent_id", params)
    ]


def session_info(db: pw.SqliteDatabase, sid: str, agent: str | None = None) -> SessionOwner | None:
    """The agent and end time of one session (``agent``'s, when given; else the one
    started first), or None when it is not known. A session id another agent's events
    also name is a row of its own: each agent has only its own."""
    sql = "SELECT agent_id, ended_at FROM sessions WHERE session_id=?"
    params = [sid]
    if agent is not None:
        sql += " AND agent_id=?"
        params.append(agent)
    r = one_row(db, sql + " ORDER BY start_event_id IS NULL, start_event_id LIMIT 1", params)
    return {"agent_id": r[0], "ended_at": r[1]} if r else None


def stale_agents(db: pw.SqliteDatabase, cutoff: str) -> list[str]:
    """Agents with no active session and no activity (seen, session, message) since cutoff."""
    found = all_rows(
        db,
        """
        SELECT a.agent_id FROM agents a
        WHERE a.role IS NOT NULL
          AND (a.cleanup_event_id IS NULL OR a.cleanup_event_id < a.event_id)
          AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.agent_id = a.agent_id
                          AND s.started_at IS NOT NULL AND s.ended_at IS NULL)
          AND coalesce(a.registered_at, '') < ?
          AND coalesce(a.last_seen_at, '') < ?
          AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.agent_id = a.agent_id
                          AND (coalesce(s.started_at, '') >= ? OR coalesce(s.ended_at, '') >= ?))
          AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.agent_id = a.agent_id AND m.created_at >= ?)
        ORDER BY a.agent_id
        """,
        (cutoff, cutoff, cutoff, cutoff, cutoff),
    )
    return [r[0] for r in found]


# --------------------------------------------------------------------------- groups, addresses


def group_row(db: pw.SqliteDatabase, name: str) -> Row | None:
    """(name, group_id, description, created_by, created_at) of a live group, or None."""
    return one_row(
        db,
        f"SELECT g.name, g.group_id, g.description, g.created_by, g.created_at FROM groups g "
        f"WHERE g.name = ? AND {LIVE_GROUP}",
        (name,),
    )


def _members(db: pw.SqliteDatabase, name: str) -> list[Member]:
    return [
        {"type": t, "value": v}
        for t, v in all_rows(
            db,
            f"SELECT gm.member_type, gm.member_value FROM group_members gm JOIN groups g ON g.name = gm.group_name "
            f"WHERE gm.group_name = ? AND {LIVE_GROUP} AND {LIVE_MEMBER} ORDER BY gm.member_type, gm.member_value",
            (name,),
        )
    ]


def _everyone_info(db: pw.SqliteDatabase) -> dict[str, Any]:
    return {
        "name": EVERYONE,
        "group_id": "",
        "description": EVERYONE_DESCRIPTION,
        "created_by": "",
        "created_at": "",
        "builtin": True,
        "member_count": len(live_agents(db)),
    }


def list_groups(db: pw.SqliteDatabase) -> list[dict[str, Any]]:
    """Existing groups by name, the built-in ``everyone`` first. ``member_count``
    counts member entries (agents and roles); for ``everyone`` the active agents."""
    out = [_everyone_info(db)]
    counts_by: dict[str, int] = dict(
        all_rows(
            db,
            f"SELECT gm.group_name, count(*) FROM group_members gm JOIN groups g "
            f"ON g.name = gm.group_name WHERE {LIVE_GROUP} AND {LIVE_MEMBER} "
            f"GROUP BY gm.group_name",
        )
    )
    for name, gid, desc, by, at in all_rows(
        db,
        f"SELECT g.name, g.group_id, g.description, g.created_by, "
        f"g.created_at FROM groups g WHERE {LIVE_GROUP} ORDER BY g.name",
    ):
        out.append(
            {
                "name": name,
                "group_id": gid or "",
                "description": desc or "",
                "created_by": by or "",
                "created_at": at or "",
                "builtin": False,
                "member_count": counts_by.get(name, 0),
            }
        )
    return out


def group_info(db: pw.SqliteDatabase, name: str) -> dict[str, Any]:
    """One `list_groups` item plus ``members`` (unexpanded).

    Raises:
        NotFound: no such group.
    """
    name = bare_name(name)
    if name == EVERYONE:
        info = _everyone_info(db)
    else:
        row = group_row(db, name)
        if row is None:
            raise NotFound(f"group {name} not found")
        members = _members(db, name)
        info = {
            "name": row[0],
            "group_id": row[1] or "",
            "description": row[2] or "",
            "created_by": row[3] or "",
            "created_at": row[4] or "",
            "builtin": False,
            "member_count": len(members),
        }
    info["members"] = group_members(db, name)
    return info


def group_members(db: pw.SqliteDatabase, name: str, expand: bool = False) -> list[Member]:
    """Members as ``{"type": "agent"|"role", "value"}``, sorted. ``expand``: the active
    agents they stand for, as ``{"type": "agent", "value": name}``, deduplicated and
    sorted. ``everyone`` has every active agent as member.

    Raises:
        NotFound: no such group.
    """
    name = bare_name(name)
    if name == EVERYONE:
        return [{"type": "agent", "value": a} for a in live_agents(db)]
    if group_row(db, name) is None:
        raise NotFound(f"group {name} not found")
    members = _members(db, name)
    if not expand:
        return members
    live = set(live_agents(db))
    names: set[str] = set()
    for m in members:
        if m["type"] == "agent":
            if m["value"] in live:
                names.add(m["value"])
        else:
            names.update(live_agents(db, m["value"]))
    return [{"type": "agent", "value": n} for n in sorted(names)]


# --------------------------------------------------------------------------- fold issues


def fold_issue_summary(db: pw.SqliteDatabase) -> dict[str, Any]:
    """Lines and events the fold refused: ``{"counts": {kind: n}, "total", "recent": [...20]}``."""
    by_kind: dict[str, int] = dict(all_rows(db, f"SELECT kind, {_ISSUES} FROM fold_issues GROUP BY kind ORDER BY kind"))
    recent = [
        {"kind": k, "shard": s, "event_id": e, "reason": r, "seen_at": at}
        for k, s, e, r, at in all_rows(
            db,
            "SELECT kind, shard, event_id, reason, seen_at FROM fold_issues ORDER BY seen_at DESC, key DESC LIMIT 20",
        )
    ]
    return {"counts": by_kind, "total": sum(by_kind.values()), "recent": recent}


def fold_counts(db: pw.SqliteDatabase) -> dict[str, int]:
    """How many lines/events the fold refused so far, by kind (for `sync status`)."""
    return dict(all_rows(db, f"SELECT kind, {_ISSUES} FROM fold_issues GROUP BY kind"))

"""Mention resolution: which mention values reach an agent, a role or a group, decided when a query runs.

A message mentions agent A when one of its ``mention`` refs is A's name, A's
role, ``everyone``, or an existing group that has A or A's role as a member.
Resolution happens at read time, from the current agents and groups, so an
agent that joins a group later sees the messages sent to the group before it
joined. Messages carry the id of their mention set (``sig_id``); `sigs_for`
finds the sets that contain one of a list of targets.
"""

from __future__ import annotations

import peewee as pw

from .directory import EVERYONE, LIVE_GROUP, LIVE_MEMBER, bare_name, get_agent
from .sql import all_rows, one_row, qmarks


def _role_of(db: pw.SqliteDatabase, agent: str) -> str | None:
    row = one_row(db, "SELECT role FROM agents WHERE agent_id = ?", (agent,))
    return row[0] if row else None


def _groups_holding(db: pw.SqliteDatabase, *, agent: str | None = None, role: str | None = None) -> list[str]:
    """Existing groups that have ``agent`` (as an agent member) or ``role`` (as a role member)."""
    cond, params = [], []
    if agent:
        cond.append("(gm.member_type = 'agent' AND gm.member_value = ?)")
        params.append(agent)
    if role:
        cond.append("(gm.member_type = 'role' AND gm.member_value = ?)")
        params.append(role)
    if not cond:
        return []
    return [
        r[0]
        for r in all_rows(
            db,
            f"SELECT DISTINCT g.name FROM groups g JOIN group_members gm ON gm.group_name = g.name "
            f"WHERE {LIVE_GROUP} AND {LIVE_MEMBER} AND ({' OR '.join(cond)}) ORDER BY g.name",
            params,
        )
    ]


def mention_targets(db: pw.SqliteDatabase, agent: str) -> list[str]:
    """Mention values that reach ``agent`` now: its name, its role, ``everyone`` and the
    existing groups that hold the agent or its role."""
    agent = bare_name(agent)
    role = _role_of(db, agent)
    targets = {agent, EVERYONE, *_groups_holding(db, agent=agent, role=role)}
    if role:
        targets.add(role)
    return sorted(targets)


def role_targets(db: pw.SqliteDatabase, role: str) -> list[str]:
    """Mention values that reach every agent of ``role``: the role itself, ``everyone``
    and the existing groups that hold the role as a member (not groups that merely
    hold some agent of that role)."""
    role = bare_name(role)
    return sorted({role, EVERYONE, *_groups_holding(db, role=role)})


def sigs_for(db: pw.SqliteDatabase, targets: list[str]) -> set[int]:
    """The mention sets that contain at least one of ``targets``."""
    if not targets:
        return set()
    return {
        r[0]
        for r in all_rows(
            db, f"SELECT DISTINCT sig_id FROM mention_sig_targets WHERE target IN ({qmarks(len(targets))})", targets
        )
    }


def targets_of(db: pw.SqliteDatabase, name: str) -> list[str]:
    """Names whose mention counts as mentioning ``name`` (an agent, else a role or group), like the inbox."""
    if get_agent(db, name) is not None:
        return list(mention_targets(db, name))
    return list(role_targets(db, name))

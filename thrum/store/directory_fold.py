"""Agents, sessions, groups and threads in the fold: one upsert per event, order-independent.

Rules (part of the projection's rules, `thrum.store.projection`):

- Each row keeps the event that decided it, and an upsert replaces it only under
  the rule for its kind: the latest registration and cleanup of an agent, the
  latest group create, delete and membership change (by event_id); the earliest
  session start and end, and the earliest thread create. So replicas that see
  the same events in any order hold the same rows.
- An agent's work contexts are kept per session, the newest by its git time
  (then by event_id).

Each function takes the running fold transaction (`thrum.store.fold.Folder`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..presence import NOT_PRESENCE

if TYPE_CHECKING:
    from .fold import Folder


# --------------------------------------------------------------------------- agents, sessions


def agent_register(f: Folder, batch: list[dict[str, Any]]) -> None:
    for d in batch:
        f.c.execute(
            "INSERT INTO agents(agent_id, kind, name, role, module, worktree, display, "
            "registered_at, event_id, cleanup_reason) VALUES (?,?,?,?,?,?,?,?,?, '') "
            "ON CONFLICT(agent_id) DO UPDATE SET kind=excluded.kind, name=excluded.name, "
            "role=excluded.role, module=excluded.module, worktree=excluded.worktree, "
            "display=excluded.display, event_id=excluded.event_id "
            "WHERE agents.event_id IS NULL OR excluded.event_id > agents.event_id",
            (
                d["agent_id"],
                d["kind"],
                d["name"],
                d["role"],
                d["module"],
                d["worktree"],
                d["display"],
                d["timestamp"],
                d["event_id"],
            ),
        )
        f.c.execute(
            "UPDATE agents SET registered_at=? WHERE agent_id=? AND (registered_at IS NULL OR registered_at > ?)",
            (d["timestamp"], d["agent_id"], d["timestamp"]),
        )


def agent_cleanup(f: Folder, batch: list[dict[str, Any]]) -> None:
    for d in batch:
        f.c.execute(
            "INSERT INTO agents(agent_id, cleanup_event_id, cleanup_reason, cleanup_by, module, worktree, display) "
            "VALUES (?,?,?,?, '', '', '') ON CONFLICT(agent_id) DO UPDATE SET "
            "cleanup_event_id=excluded.cleanup_event_id, cleanup_reason=excluded.cleanup_reason, "
            "cleanup_by=excluded.cleanup_by "
            "WHERE agents.cleanup_event_id IS NULL OR excluded.cleanup_event_id > agents.cleanup_event_id",
            (d["agent_id"], d["event_id"], d["reason"], d.get("by") or ""),
        )


def last_seen(f: Folder, events: Iterable[dict[str, Any]]) -> None:
    """Each author's newest event that shows it acting is when it was last seen
    (`thrum.presence`): the same on every replica holding the same events, and rebuilt
    with the projection. One upsert per author in the batch; a time never moves back.
    The row may come before the agent's registration (role NULL: not listed until then)."""
    newest: dict[str, str] = {}
    author_of, time_key, not_presence = ev.event_author, ev.time_key, NOT_PRESENCE
    for d in events:  # every event of the batch (a rebuild's million): the checks inlined
        if d["type"] in not_presence:
            continue
        author = author_of(d)
        if not author:
            continue
        ts = d["timestamp"]
        # One form, so the strings compare as instants (a time in that form is its own key).
        at = ts if len(ts) == 24 and ts[23] == "Z" and ts[19] == "." else time_key(ts)
        if at > newest.get(author, ""):
            newest[author] = at
    if newest:
        f.c.executemany(
            "INSERT INTO agents(agent_id, last_seen_at, module, worktree, display, cleanup_reason) "
            "VALUES (?,?, '', '', '', '') ON CONFLICT(agent_id) DO UPDATE SET last_seen_at=excluded.last_seen_at "
            "WHERE agents.last_seen_at IS NULL OR excluded.last_seen_at > agents.last_seen_at",
            sorted(newest.items()),
        )


def agent_update(f: Folder, batch: list[dict[str, Any]]) -> None:
    for d in batch:
        for ctx in d["work_contexts"]:
            sid = ctx.get("session_id")
            if not isinstance(sid, str) or not sid:
                continue
            git_at = ctx.get("git_updated_at") if isinstance(ctx.get("git_updated_at"), str) else ""
            f.c.execute(
                "INSERT INTO agent_contexts(agent_id, session_id, context, git_updated_at, event_id) "
                "VALUES (?,?,?,?,?) ON CONFLICT(agent_id, session_id) DO UPDATE SET "
                "context=excluded.context, git_updated_at=excluded.git_updated_at, "
                "event_id=excluded.event_id WHERE excluded.git_updated_at > agent_contexts.git_updated_at "
                "OR (excluded.git_updated_at = agent_contexts.git_updated_at "
                "AND excluded.event_id > agent_contexts.event_id)",
                (d["agent_id"], sid, ev.dumps(ctx).decode(), git_at, d["event_id"]),
            )


def session_start(f: Folder, batch: list[dict[str, Any]]) -> None:
    for d in batch:
        f.c.execute(
            "INSERT INTO sessions(session_id, agent_id, started_at, start_event_id) VALUES (?,?,?,?) "
            "ON CONFLICT(session_id, agent_id) DO UPDATE SET "
            "started_at=excluded.started_at, start_event_id=excluded.start_event_id "
            "WHERE sessions.start_event_id IS NULL OR excluded.start_event_id < sessions.start_event_id",
            (d["session_id"], d["agent_id"], d["timestamp"], d["event_id"]),
        )


def session_end(f: Folder, batch: list[dict[str, Any]]) -> None:
    for d in batch:
        f.c.execute(
            "INSERT INTO sessions(session_id, agent_id, ended_at, end_reason, end_event_id) "
            "VALUES (?,?,?,?,?) ON CONFLICT(session_id, agent_id) DO UPDATE SET "
            "ended_at=excluded.ended_at, end_reason=excluded.end_reason, end_event_id=excluded.end_event_id "
            "WHERE sessions.end_event_id IS NULL OR excluded.end_event_id < sessions.end_event_id",
            (d["session_id"], d["agent_id"], d["timestamp"], d["reason"], d["event_id"]),
        )


# --------------------------------------------------------------------------- groups, threads


def group_create(f: Folder, batch: list[dict[str, Any]]) -> None:
    for d in batch:
        f.c.execute(
            "INSERT INTO groups(name, group_id, description, created_by, created_at, event_id) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT(name) DO UPDATE SET group_id=excluded.group_id, "
            "description=excluded.description, created_by=excluded.created_by, "
            "created_at=excluded.created_at, event_id=excluded.event_id "
            "WHERE groups.event_id IS NULL OR excluded.event_id > groups.event_id",
            (d["name"], d["group_id"], d["description"], d["created_by"], d["timestamp"], d["event_id"]),
        )


def group_delete(f: Folder, batch: list[dict[str, Any]]) -> None:
    for d in batch:
        f.c.execute(
            "INSERT INTO groups(name, description, created_by, deleted_event_id) VALUES (?, '', '', ?) "
            "ON CONFLICT(name) DO UPDATE SET deleted_event_id=excluded.deleted_event_id "
            "WHERE groups.deleted_event_id IS NULL OR excluded.deleted_event_id > groups.deleted_event_id",
            (d["name"], d["event_id"]),
        )


def group_member(f: Folder, batch: list[dict[str, Any]]) -> None:
    for d in batch:
        state = "add" if d["type"] == "group.member.add" else "remove"
        f.c.execute(
            "INSERT INTO group_members(group_name, member_type, member_value, state, event_id, "
            "changed_by, changed_at) VALUES (?,?,?,?,?,?,?) "
            "ON CONFLICT(group_name, member_type, member_value) DO UPDATE SET state=excluded.state, "
            "event_id=excluded.event_id, changed_by=excluded.changed_by, changed_at=excluded.changed_at "
            "WHERE excluded.event_id > group_members.event_id",
            (d["group"], d["member_type"], d["member_value"], state, d["event_id"], d["agent_id"], d["timestamp"]),
        )


def thread_create(f: Folder, batch: list[dict[str, Any]]) -> None:
    for d in batch:
        f.c.execute(
            "INSERT INTO threads(thread_id, title, created_by, created_at, event_id) VALUES (?,?,?,?,?) "
            "ON CONFLICT(thread_id) DO UPDATE SET title=excluded.title, created_by=excluded.created_by, "
            "created_at=excluded.created_at, event_id=excluded.event_id "
            "WHERE excluded.event_id < threads.event_id",
            (d["thread_id"], d["title"], d["created_by"], d["timestamp"], d["event_id"]),
        )

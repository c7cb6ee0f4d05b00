"""The directory tables: agents and their work contexts, sessions, groups and their members, threads."""

from __future__ import annotations

import peewee as pw

from .base import Base


class Agent(Base):
    agent_id = pw.TextField(primary_key=True)
    kind = pw.TextField(null=True)
    name = pw.TextField(null=True)
    role = pw.TextField(null=True)  # NULL: only a cleanup was seen so far
    module = pw.TextField(default="")
    worktree = pw.TextField(default="")
    display = pw.TextField(default="")
    registered_at = pw.TextField(null=True)
    last_seen_at = pw.TextField(null=True)  # its newest event that shows it acting (directory_fold.last_seen)
    event_id = pw.TextField(null=True)  # latest agent.register
    cleanup_event_id = pw.TextField(null=True)
    cleanup_reason = pw.TextField(default="")
    cleanup_by = pw.TextField(null=True)  # who removed it ("": itself, or a log written before `by`)

    class Meta:
        table_name = "agents"


class AgentContext(Base):
    agent_id = pw.TextField()
    session_id = pw.TextField()
    context = pw.TextField()
    git_updated_at = pw.TextField(default="")
    event_id = pw.TextField()

    class Meta:
        table_name = "agent_contexts"
        primary_key = pw.CompositeKey("agent_id", "session_id")


class Session(Base):
    """A session belongs to the agent whose (signed) events name it: keyed by both, so
    another agent's start or end naming the same id is a row of its own (issue 31)."""

    session_id = pw.TextField()
    agent_id = pw.TextField()
    started_at = pw.TextField(null=True)
    ended_at = pw.TextField(null=True)
    end_reason = pw.TextField(null=True)
    start_event_id = pw.TextField(null=True)
    end_event_id = pw.TextField(null=True)
    last_seen_at = pw.TextField(null=True)  # unused since schema 13: presence is the agent's (agents.last_seen_at)

    class Meta:
        table_name = "sessions"
        primary_key = pw.CompositeKey("session_id", "agent_id")


class Group(Base):
    name = pw.TextField(primary_key=True)
    group_id = pw.TextField(null=True)
    description = pw.TextField(default="")
    created_by = pw.TextField(default="")
    created_at = pw.TextField(null=True)
    event_id = pw.TextField(null=True)  # latest group.create
    deleted_event_id = pw.TextField(null=True)  # latest group.delete

    class Meta:
        table_name = "groups"


class GroupMember(Base):
    group_name = pw.TextField()
    member_type = pw.TextField()  # agent | role
    member_value = pw.TextField()
    state = pw.TextField()  # add | remove (last writer by event_id wins)
    event_id = pw.TextField()
    changed_by = pw.TextField(default="")
    changed_at = pw.TextField(default="")

    class Meta:
        table_name = "group_members"
        primary_key = pw.CompositeKey("group_name", "member_type", "member_value")
        without_rowid = True


class Thread(Base):
    thread_id = pw.TextField(primary_key=True)
    title = pw.TextField(default="")
    created_by = pw.TextField(default="")
    created_at = pw.TextField(default="")
    event_id = pw.TextField()

    class Meta:
        table_name = "threads"

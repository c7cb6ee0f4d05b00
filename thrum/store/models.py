"""SQLite projection schema (peewee models).

The tables named in spec/messaging-cli.md keep their spec names and columns
(messages, message_scopes, message_refs, message_edits, message_reads, with the
listed indexes); the rest hold what the fold needs to stay order-independent
(raw edit and delete events, last-writer-wins read state) and what the daemon
needs (agents, sessions, groups, threads, positions, issues).

Everything here can be thrown away and rebuilt from the log: bump
`SCHEMA_VERSION` whenever a table changes and the daemon rebuilds on start.
"""

from __future__ import annotations

from pathlib import Path

import peewee as pw

SCHEMA_VERSION = 3

database_proxy = pw.DatabaseProxy()


class Base(pw.Model):
    class Meta:
        database = database_proxy
        legacy_table_names = False


class Message(Base):
    message_id = pw.TextField(primary_key=True)
    agent_id = pw.TextField()
    session_id = pw.TextField()
    created_at = pw.TextField()
    updated_at = pw.TextField(null=True)
    deleted = pw.IntegerField(default=0)
    deleted_at = pw.TextField(null=True)
    delete_reason = pw.TextField(null=True)
    body_format = pw.TextField()
    body_content = pw.TextField()
    body_structured = pw.TextField(null=True)
    # beyond the spec's columns:
    thread_id = pw.TextField(default="")
    priority = pw.TextField(default="normal")
    authored_by = pw.TextField(default="")
    disclosed = pw.IntegerField(default=0)
    event_id = pw.TextField()          # the message.create that won (lowest event_id)
    edit_count = pw.IntegerField(default=0)

    class Meta:
        table_name = "messages"
        indexes = ()


class MessageScope(Base):
    message_id = pw.TextField()
    scope_type = pw.TextField()
    scope_value = pw.TextField()

    class Meta:
        table_name = "message_scopes"
        primary_key = pw.CompositeKey("message_id", "scope_type", "scope_value")
        without_rowid = True


class MessageRef(Base):
    message_id = pw.TextField()
    ref_type = pw.TextField()
    ref_value = pw.TextField()

    class Meta:
        table_name = "message_refs"
        primary_key = pw.CompositeKey("message_id", "ref_type", "ref_value")
        without_rowid = True


class MessageEdit(Base):
    id = pw.AutoField()
    message_id = pw.TextField()
    edited_at = pw.TextField()
    edited_by = pw.TextField()
    old_content = pw.TextField(null=True)
    new_content = pw.TextField(null=True)
    old_structured = pw.TextField(null=True)
    new_structured = pw.TextField(null=True)
    old_format = pw.TextField(null=True)
    new_format = pw.TextField(null=True)
    session_id = pw.TextField(default="")
    event_id = pw.TextField(default="")

    class Meta:
        table_name = "message_edits"


class MessageRead(Base):
    message_id = pw.TextField()
    session_id = pw.TextField()
    agent_id = pw.TextField()
    read_at = pw.TextField()

    class Meta:
        table_name = "message_reads"
        primary_key = pw.CompositeKey("message_id", "session_id")


class ReadState(Base):
    """Last-writer-wins (by event_id) read/unread state per agent and message."""

    agent_id = pw.TextField()
    message_id = pw.TextField()
    is_read = pw.IntegerField()
    event_id = pw.TextField()
    at = pw.TextField()

    class Meta:
        table_name = "read_state"
        primary_key = pw.CompositeKey("agent_id", "message_id")
        without_rowid = True


class ArchiveMark(Base):
    agent_id = pw.TextField()
    message_id = pw.TextField()
    event_id = pw.TextField()
    archived_at = pw.TextField()

    class Meta:
        table_name = "archive_marks"
        primary_key = pw.CompositeKey("agent_id", "message_id")
        without_rowid = True


class EditEvent(Base):
    """Every valid-looking message.edit seen, applied or not yet (edit before create)."""

    event_id = pw.TextField(primary_key=True)
    message_id = pw.TextField()
    agent_id = pw.TextField()
    session_id = pw.TextField(default="")
    timestamp = pw.TextField()
    body_format = pw.TextField()
    body_content = pw.TextField()
    body_structured = pw.TextField(default="")

    class Meta:
        table_name = "edit_events"
        without_rowid = True


class DeleteEvent(Base):
    event_id = pw.TextField(primary_key=True)
    message_id = pw.TextField()
    agent_id = pw.TextField()
    timestamp = pw.TextField()
    reason = pw.TextField(default="")

    class Meta:
        table_name = "delete_events"
        without_rowid = True


class Agent(Base):
    agent_id = pw.TextField(primary_key=True)
    kind = pw.TextField(null=True)
    name = pw.TextField(null=True)
    role = pw.TextField(null=True)          # NULL: only a cleanup was seen so far
    module = pw.TextField(default="")
    worktree = pw.TextField(default="")
    display = pw.TextField(default="")
    registered_at = pw.TextField(null=True)
    last_seen_at = pw.TextField(null=True)  # local liveness, never written to the log
    event_id = pw.TextField(null=True)      # latest agent.register
    cleanup_event_id = pw.TextField(null=True)
    cleanup_reason = pw.TextField(default="")

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
    session_id = pw.TextField(primary_key=True)
    agent_id = pw.TextField(default="")
    started_at = pw.TextField(null=True)
    ended_at = pw.TextField(null=True)
    end_reason = pw.TextField(null=True)
    start_event_id = pw.TextField(null=True)
    end_event_id = pw.TextField(null=True)
    last_seen_at = pw.TextField(null=True)  # local liveness only

    class Meta:
        table_name = "sessions"


class Group(Base):
    name = pw.TextField(primary_key=True)
    group_id = pw.TextField(null=True)
    description = pw.TextField(default="")
    created_by = pw.TextField(default="")
    created_at = pw.TextField(null=True)
    event_id = pw.TextField(null=True)          # latest group.create
    deleted_event_id = pw.TextField(null=True)  # latest group.delete

    class Meta:
        table_name = "groups"


class GroupMember(Base):
    group_name = pw.TextField()
    member_type = pw.TextField()  # agent | role
    member_value = pw.TextField()
    state = pw.TextField()        # add | remove (last writer by event_id wins)
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


class Subscription(Base):
    """Live subscriptions (runtime state; cleared when the daemon starts)."""

    id = pw.AutoField()
    session_id = pw.TextField(default="")
    connection_id = pw.TextField(default="")
    filter_type = pw.TextField()
    scope_type = pw.TextField(null=True)
    scope_value = pw.TextField(null=True)
    mention = pw.TextField(null=True)
    created_at = pw.TextField()

    class Meta:
        table_name = "subscriptions"


class AppliedEvent(Base):
    event_id = pw.TextField(primary_key=True)

    class Meta:
        table_name = "applied_events"
        without_rowid = True


class LogPosition(Base):
    shard = pw.TextField(primary_key=True)
    offset = pw.IntegerField()
    tail = pw.TextField()

    class Meta:
        table_name = "log_positions"


class FoldIssue(Base):
    """A line or event the fold refused: malformed, forged, conflicting. Kept for `sync status`."""

    key = pw.TextField(primary_key=True)  # stable: shard + event_id or line digest
    kind = pw.TextField()                 # malformed | forged | conflict
    shard = pw.TextField()
    event_id = pw.TextField(default="")
    reason = pw.TextField()
    seen_at = pw.TextField()

    class Meta:
        table_name = "fold_issues"


class SchemaVersion(Base):
    version = pw.IntegerField(primary_key=True)

    class Meta:
        table_name = "schema_version"


class KeyValue(Base):
    """Small daemon state that must survive restarts but is not part of the log."""

    key = pw.TextField(primary_key=True)
    value = pw.TextField()

    class Meta:
        table_name = "kv"


ALL_MODELS = [
    Message, MessageScope, MessageRef, MessageEdit, MessageRead, ReadState, ArchiveMark,
    EditEvent, DeleteEvent, Agent, AgentContext, Session, Group, GroupMember, Thread,
    Subscription, AppliedEvent, LogPosition, FoldIssue, SchemaVersion, KeyValue,
]

# Indexes named in the spec, plus the ones our queries need.
INDEXES = [
    "CREATE INDEX IF NOT EXISTS idx_messages_time ON messages (created_at)",
    "CREATE INDEX IF NOT EXISTS idx_messages_updated ON messages (updated_at)",
    "CREATE INDEX IF NOT EXISTS idx_messages_agent ON messages (agent_id, created_at)",
    "CREATE INDEX IF NOT EXISTS idx_messages_session ON messages (session_id)",
    "CREATE INDEX IF NOT EXISTS idx_messages_thread ON messages (thread_id, created_at)",
    "CREATE INDEX IF NOT EXISTS idx_scopes_lookup ON message_scopes (scope_type, scope_value, message_id)",
    "CREATE INDEX IF NOT EXISTS idx_refs_lookup ON message_refs (ref_type, ref_value, message_id)",
    "CREATE INDEX IF NOT EXISTS idx_edits_message ON message_edits (message_id, edited_at)",
    "CREATE INDEX IF NOT EXISTS idx_message_reads_agent ON message_reads (agent_id)",
    "CREATE INDEX IF NOT EXISTS idx_message_reads_message ON message_reads (message_id)",
    "CREATE INDEX IF NOT EXISTS idx_read_state_message ON read_state (message_id, is_read)",
    "CREATE INDEX IF NOT EXISTS idx_edit_events_message ON edit_events (message_id)",
    "CREATE INDEX IF NOT EXISTS idx_delete_events_message ON delete_events (message_id)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_agent ON sessions (agent_id)",
    "CREATE INDEX IF NOT EXISTS idx_agents_role ON agents (role)",
]

PRAGMAS = {
    "journal_mode": "wal",
    "synchronous": "normal",  # the log is the durable copy; the projection is rebuildable
    "foreign_keys": 0,        # receipts and edits may arrive before their message
    "cache_size": -65536,
    "temp_store": "memory",
    "busy_timeout": 10000,
}


def open_database(path: Path | str) -> pw.SqliteDatabase:
    """Open (creating if needed) the projection database in WAL mode.

    Models are bound per call (`bind_ctx`), so several databases can live in one
    process (tests, benchmarks).
    """
    db = pw.SqliteDatabase(str(path), pragmas=PRAGMAS, check_same_thread=False)
    db.connect(reuse_if_open=True)
    return db


def create_schema(db: pw.SqliteDatabase) -> None:
    with db.bind_ctx(ALL_MODELS), db.atomic():
        db.create_tables(ALL_MODELS, safe=True)
        for sql in INDEXES:
            db.execute_sql(sql)
        if SchemaVersion.select().count() == 0:
            SchemaVersion.create(version=SCHEMA_VERSION)


def schema_version(db: pw.SqliteDatabase) -> int | None:
    """The version recorded in the database, or None when it has no (or a broken) schema."""
    try:
        row = db.execute_sql("SELECT max(version) FROM schema_version").fetchone()
    except pw.DatabaseError:
        return None
    return row[0] if row else None


def drop_schema(db: pw.SqliteDatabase) -> None:
    names = [r[0] for r in db.execute_sql(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'").fetchall()]
    with db.atomic():
        for name in names:
            db.execute_sql(f'DROP TABLE IF EXISTS "{name}"')

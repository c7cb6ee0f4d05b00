"""SQLite projection schema (peewee models).

The tables named in spec/messaging-cli.md keep their spec names and columns
(messages, message_scopes, message_refs, message_edits, with the listed indexes;
message_reads is a view over read_state, see `MessageRead`); the rest hold what
the fold needs to stay order-independent (raw edit and delete events,
last-writer-wins read state), what the inbox queries need to be fast (mention
sets and counters kept by triggers) and what the daemon needs (agents, sessions,
groups, threads, positions, issues).

Use raw SQL through ``db.execute_sql`` / ``db.connection()``; the models are
only bound (``bind_ctx``) while the tables are created (`thrum.store.database`).
The counter tables are kept by triggers (`thrum.store.counters`).

Everything here can be thrown away and rebuilt from the log: bump
`SCHEMA_VERSION` whenever a table changes and the daemon rebuilds on start.
"""

from __future__ import annotations

import peewee as pw

SCHEMA_VERSION = 8  # 5: applied_events keyed by event id and author (store.fold.dedup_key);
#                    6: message_scopes/message_refs.pos (the order given); 7: messages.subject; 8: idempotency_keys

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
    event_id = pw.TextField()  # the message.create that won (lowest event_id)
    edit_count = pw.IntegerField(default=0)
    created_key = pw.TextField(default="")  # events.time_key(created_at): sortable UTC form
    updated_key = pw.TextField(default="")  # time_key(updated_at or created_at)
    sig_id = pw.IntegerField(default=0)  # mention_sigs.sig_id of the message's mention set
    subject = pw.TextField(default="")  # message.create's optional subject line

    class Meta:
        table_name = "messages"
        indexes = ()


class MessageScope(Base):
    message_id = pw.TextField()
    scope_type = pw.TextField()
    scope_value = pw.TextField()
    pos = pw.IntegerField(default=0)  # not in the spec's table: the order the author gave (message get)

    class Meta:
        table_name = "message_scopes"
        primary_key = pw.CompositeKey("message_id", "scope_type", "scope_value")
        without_rowid = True


class MessageRef(Base):
    message_id = pw.TextField()
    ref_type = pw.TextField()
    ref_value = pw.TextField()
    pos = pw.IntegerField(default=0)  # not in the spec's table: the order the author gave (message get)

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
    """The spec's ``message_reads``, as a VIEW over `ReadState` (read-only).

    The spec keeps one row per (message, session); a message counts as read when
    any session of the agent read it. `ReadState` holds exactly that decision per
    (message, agent), last writer wins by event_id so that ``message unread`` works
    and replicas agree, with the session and time of the winning read. Keeping a
    second per-session table cost as much as the rest of a rebuild and answered
    no query, so ``message_reads`` shows the read rows of `ReadState`.
    """

    message_id = pw.TextField()
    session_id = pw.TextField()
    agent_id = pw.TextField()
    read_at = pw.TextField()

    class Meta:
        table_name = "message_reads"
        primary_key = pw.CompositeKey("message_id", "session_id")


class ReadState(Base):
    """Last-writer-wins (by event_id) read/unread state per message and agent."""

    message_id = pw.TextField()
    agent_id = pw.TextField()
    is_read = pw.IntegerField()
    event_id = pw.TextField()
    at = pw.TextField()
    session_id = pw.TextField(default="")

    class Meta:
        table_name = "read_state"
        primary_key = pw.CompositeKey("message_id", "agent_id")
        without_rowid = True


class ArchiveMark(Base):
    """Per agent: messages it archived (hidden from its inbox). The first archive is final."""

    message_id = pw.TextField()
    agent_id = pw.TextField()
    event_id = pw.TextField()
    archived_at = pw.TextField()

    class Meta:
        table_name = "archive_marks"
        primary_key = pw.CompositeKey("message_id", "agent_id")
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


class PendingTarget(Base):
    """Message ids that edit or delete events name before the message arrived."""

    message_id = pw.TextField(primary_key=True)

    class Meta:
        table_name = "pending_targets"
        without_rowid = True


class MentionSig(Base):
    """A distinct set of mention targets (JSON list, sorted). Messages point at one."""

    sig_id = pw.AutoField()
    sig = pw.TextField(unique=True)

    class Meta:
        table_name = "mention_sigs"


class MentionSigTarget(Base):
    target = pw.TextField()
    sig_id = pw.IntegerField()

    class Meta:
        table_name = "mention_sig_targets"
        primary_key = pw.CompositeKey("target", "sig_id")
        without_rowid = True


class SigTotal(Base):
    """Non-deleted messages per mention set (kept by triggers; see COUNTER_TRIGGERS)."""

    sig_id = pw.IntegerField(primary_key=True)
    n = pw.IntegerField(default=0)

    class Meta:
        table_name = "sig_totals"


class SigAuthorTotal(Base):
    author = pw.TextField()
    sig_id = pw.IntegerField()
    n = pw.IntegerField(default=0)

    class Meta:
        table_name = "sig_author_totals"
        primary_key = pw.CompositeKey("author", "sig_id")
        without_rowid = True


class AgentSigCount(Base):
    """Per agent and mention set: non-deleted messages it has read / archived / both.

    ``own`` is 1 for the agent's own messages, so an inbox that hides them can
    leave them out of its counts.
    """

    agent_id = pw.TextField()
    sig_id = pw.IntegerField()
    own = pw.IntegerField()
    n_read = pw.IntegerField(default=0)
    n_arch = pw.IntegerField(default=0)
    n_read_arch = pw.IntegerField(default=0)

    class Meta:
        table_name = "agent_sig_counts"
        primary_key = pw.CompositeKey("agent_id", "sig_id", "own")
        without_rowid = True


class Agent(Base):
    agent_id = pw.TextField(primary_key=True)
    kind = pw.TextField(null=True)
    name = pw.TextField(null=True)
    role = pw.TextField(null=True)  # NULL: only a cleanup was seen so far
    module = pw.TextField(default="")
    worktree = pw.TextField(default="")
    display = pw.TextField(default="")
    registered_at = pw.TextField(null=True)
    last_seen_at = pw.TextField(null=True)  # local liveness, never written to the log
    event_id = pw.TextField(null=True)  # latest agent.register
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


class AppliedEvent(Base):
    """Event ids already folded, except message.create winners (their id is in messages.event_id)."""

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
    kind = pw.TextField()  # malformed | forged | conflict
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


class IdempotencyKey(Base):
    """Which write (kind, first event, message, content digest) a client's key named: store/idempotency.py."""

    agent_id, key, kind = pw.TextField(), pw.TextField(), pw.TextField()
    event_id, message_id, digest = pw.TextField(), pw.TextField(), pw.TextField()

    class Meta:
        table_name = "idempotency_keys"
        primary_key = pw.CompositeKey("agent_id", "key")
        without_rowid = True


TABLE_MODELS = [
    Message,
    MessageScope,
    MessageRef,
    MessageEdit,
    ReadState,
    ArchiveMark,
    EditEvent,
    DeleteEvent,
    PendingTarget,
    MentionSig,
    MentionSigTarget,
    SigTotal,
    SigAuthorTotal,
    AgentSigCount,
    Agent,
    AgentContext,
    Session,
    Group,
    GroupMember,
    Thread,
    AppliedEvent,
    LogPosition,
    FoldIssue,
    SchemaVersion,
    KeyValue,
    IdempotencyKey,
]

ALL_MODELS = TABLE_MODELS + [MessageRead]

VIEWS = [
    "CREATE VIEW IF NOT EXISTS message_reads AS SELECT message_id, session_id, agent_id, at AS read_at "
    "FROM read_state WHERE is_read = 1",
]

# Indexes the fold itself reads through: present while a rebuild loads.
FOLD_INDEXES = [
    "CREATE INDEX IF NOT EXISTS idx_edit_events_message ON edit_events (message_id)",
    "CREATE INDEX IF NOT EXISTS idx_delete_events_message ON delete_events (message_id)",
    "CREATE INDEX IF NOT EXISTS idx_edits_message ON message_edits (message_id, edited_at)",
]

# Indexes named in the spec, plus the ones our queries need. A rebuild creates
# these after loading (bulk index creation sorts once instead of inserting 1M times).
QUERY_INDEXES = [
    "CREATE INDEX IF NOT EXISTS idx_messages_time ON messages (created_key, message_id)",
    "CREATE INDEX IF NOT EXISTS idx_messages_updated ON messages (updated_key, message_id)",
    "CREATE INDEX IF NOT EXISTS idx_messages_agent ON messages (agent_id, created_key)",
    "CREATE INDEX IF NOT EXISTS idx_messages_session ON messages (session_id)",
    "CREATE INDEX IF NOT EXISTS idx_messages_thread ON messages (thread_id, created_key) WHERE thread_id <> ''",
    "CREATE INDEX IF NOT EXISTS idx_scopes_lookup ON message_scopes (scope_type, scope_value, message_id)",
    "CREATE INDEX IF NOT EXISTS idx_refs_lookup ON message_refs (ref_type, ref_value, message_id)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_agent ON sessions (agent_id)",
    "CREATE INDEX IF NOT EXISTS idx_agents_role ON agents (role)",
]

INDEXES = FOLD_INDEXES + QUERY_INDEXES

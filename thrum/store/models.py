"""SQLite projection schema (peewee models).

The tables named in spec/messaging-cli.md keep their spec names and columns
(messages, message_scopes, message_refs, message_edits, with the listed indexes;
message_reads is a view over read_state, see `MessageRead`); the rest hold what
the fold needs to stay order-independent (raw edit and delete events,
last-writer-wins read state), what the inbox queries need to be fast (mention
sets and counters kept by triggers) and what the daemon needs (agents, sessions,
groups, threads, positions, issues).

Use raw SQL through ``db.execute_sql`` / ``db.connection()``; the models are
only bound (``bind_ctx``) while the tables are created.

Everything here can be thrown away and rebuilt from the log: bump
`SCHEMA_VERSION` whenever a table changes and the daemon rebuilds on start.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import peewee as pw

SCHEMA_VERSION = 5  # 5: idempotency_keys

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
    created_key = pw.TextField(default="")  # events.time_key(created_at): sortable UTC form
    updated_key = pw.TextField(default="")  # time_key(updated_at or created_at)
    sig_id = pw.IntegerField(default=0)     # mention_sigs.sig_id of the message's mention set

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


class IdempotencyKey(Base):
    """Which write a client's idempotency key named (thrum/store/idempotency.py); from the log."""

    agent_id = pw.TextField()
    key = pw.TextField()
    kind = pw.TextField()        # message.create | message.edit
    event_id = pw.TextField()    # the first event (lowest id) that carried the key
    message_id = pw.TextField()
    digest = pw.TextField()      # of the body content it carried: a reuse for other content is refused

    class Meta:
        table_name = "idempotency_keys"
        primary_key = pw.CompositeKey("agent_id", "key")
        without_rowid = True


TABLE_MODELS = [
    Message, MessageScope, MessageRef, MessageEdit, ReadState, ArchiveMark,
    EditEvent, DeleteEvent, PendingTarget, MentionSig, MentionSigTarget, SigTotal, SigAuthorTotal, AgentSigCount, Agent, AgentContext, Session, Group, GroupMember, Thread,
    Subscription, AppliedEvent, LogPosition, FoldIssue, SchemaVersion, KeyValue, IdempotencyKey,
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


# ----------------------------------------------------------------------------- counters
# sig_totals, sig_author_totals and agent_sig_counts are sums over messages; the
# triggers below keep them equal to those sums on every insert, update and delete
# of messages, read_state and archive_marks, so no code path can forget them. A
# rebuild loads without the triggers and computes the sums once (COUNTER_REBUILD).

_ASC_UPSERT = (
    " ON CONFLICT(agent_id, sig_id, own) DO UPDATE SET n_read = n_read + excluded.n_read,"
    " n_arch = n_arch + excluded.n_arch, n_read_arch = n_read_arch + excluded.n_read_arch;"
)


def _message_contribution(row: str, sign: str) -> str:
    """SQL adding (sign '+') or removing ('-') one messages row's share of the counters."""
    live = f"{row}.deleted = 0"
    return (
        f"INSERT INTO sig_totals(sig_id, n) SELECT {row}.sig_id, {sign}1 WHERE {live}"
        f" ON CONFLICT(sig_id) DO UPDATE SET n = n + excluded.n;"
        f" INSERT INTO sig_author_totals(author, sig_id, n) SELECT {row}.agent_id, {row}.sig_id, {sign}1"
        f" WHERE {live} ON CONFLICT(author, sig_id) DO UPDATE SET n = n + excluded.n;"
        f" INSERT INTO agent_sig_counts(agent_id, sig_id, own, n_read, n_arch, n_read_arch)"
        f" SELECT x.agent_id, {row}.sig_id, x.agent_id = {row}.agent_id, {sign}max(x.r), {sign}max(x.a),"
        f" {sign}(max(x.r) * max(x.a)) FROM ("
        f"SELECT agent_id, 1 AS r, 0 AS a FROM read_state WHERE message_id = {row}.message_id AND is_read = 1"
        f" UNION ALL SELECT agent_id, 0, 1 FROM archive_marks WHERE message_id = {row}.message_id) AS x"
        f" WHERE {live} GROUP BY x.agent_id" + _ASC_UPSERT
    )


def _read_delta(row: str, delta: str) -> str:
    return (
        "INSERT INTO agent_sig_counts(agent_id, sig_id, own, n_read, n_arch, n_read_arch)"
        f" SELECT {row}.agent_id, m.sig_id, m.agent_id = {row}.agent_id, {delta}, 0,"
        f" ({delta}) * EXISTS(SELECT 1 FROM archive_marks a WHERE a.agent_id = {row}.agent_id"
        f" AND a.message_id = {row}.message_id)"
        f" FROM messages m WHERE m.message_id = {row}.message_id AND m.deleted = 0" + _ASC_UPSERT
    )


def _archive_delta(row: str, delta: str) -> str:
    return (
        "INSERT INTO agent_sig_counts(agent_id, sig_id, own, n_read, n_arch, n_read_arch)"
        f" SELECT {row}.agent_id, m.sig_id, m.agent_id = {row}.agent_id, 0, {delta},"
        f" ({delta}) * EXISTS(SELECT 1 FROM read_state r WHERE r.agent_id = {row}.agent_id"
        f" AND r.message_id = {row}.message_id AND r.is_read = 1)"
        f" FROM messages m WHERE m.message_id = {row}.message_id AND m.deleted = 0" + _ASC_UPSERT
    )


COUNTER_TRIGGERS = [
    "CREATE TRIGGER IF NOT EXISTS trg_messages_ins AFTER INSERT ON messages BEGIN "
    + _message_contribution("NEW", "+") + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_messages_del AFTER DELETE ON messages BEGIN "
    + _message_contribution("OLD", "-") + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_messages_upd AFTER UPDATE OF deleted, sig_id, agent_id ON messages "
    "WHEN OLD.deleted IS NOT NEW.deleted OR OLD.sig_id IS NOT NEW.sig_id OR OLD.agent_id IS NOT NEW.agent_id "
    "BEGIN " + _message_contribution("OLD", "-") + " " + _message_contribution("NEW", "+") + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_read_state_ins AFTER INSERT ON read_state WHEN NEW.is_read = 1 BEGIN "
    + _read_delta("NEW", "1") + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_read_state_upd AFTER UPDATE OF is_read ON read_state "
    "WHEN OLD.is_read IS NOT NEW.is_read BEGIN " + _read_delta("NEW", "NEW.is_read - OLD.is_read") + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_read_state_del AFTER DELETE ON read_state WHEN OLD.is_read = 1 BEGIN "
    + _read_delta("OLD", "-1") + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_archive_ins AFTER INSERT ON archive_marks BEGIN "
    + _archive_delta("NEW", "1") + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_archive_del AFTER DELETE ON archive_marks BEGIN "
    + _archive_delta("OLD", "-1") + " END",
]

# The same sums computed from scratch (rebuild, and `projection.verify_counters`).
COUNTER_QUERIES = {
    "sig_totals": "SELECT sig_id, count(*) FROM messages WHERE deleted = 0 GROUP BY sig_id",
    "sig_author_totals": "SELECT agent_id, sig_id, count(*) FROM messages WHERE deleted = 0 "
                         "GROUP BY agent_id, sig_id",
    "agent_sig_counts": (
        "SELECT x.agent_id, m.sig_id, x.agent_id = m.agent_id AS own, sum(x.r), sum(x.a), sum(x.r * x.a) FROM ("
        "SELECT agent_id, message_id, max(r) AS r, max(a) AS a FROM ("
        "SELECT agent_id, message_id, 1 AS r, 0 AS a FROM read_state WHERE is_read = 1"
        " UNION ALL SELECT agent_id, message_id, 0, 1 FROM archive_marks) GROUP BY agent_id, message_id) AS x"
        " JOIN messages m ON m.message_id = x.message_id WHERE m.deleted = 0"
        " GROUP BY x.agent_id, m.sig_id, own"),
}


PRAGMAS = {
    "journal_mode": "wal",
    "synchronous": "normal",  # the log is the durable copy; the projection is rebuildable
    "foreign_keys": 0,        # receipts and edits may arrive before their message
    "cache_size": -65536,
    "temp_store": "memory",
    "busy_timeout": 10000,
    "mmap_size": 1 << 30,     # read pages in place instead of copying them into the cache
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
    """Create every table, index and trigger (if missing) and record SCHEMA_VERSION."""
    with db.atomic():
        create_tables(db)
        finish_schema(db)


def create_tables(db: pw.SqliteDatabase) -> None:
    """Tables and the indexes the fold reads through; no query indexes, no triggers,
    no schema version (a rebuild loads into this, then calls `finish_schema`)."""
    with db.bind_ctx(TABLE_MODELS), db.atomic():
        db.create_tables(TABLE_MODELS, safe=True)
        for sql in FOLD_INDEXES + VIEWS:
            db.execute_sql(sql)


def finish_schema(db: pw.SqliteDatabase, *, compute_counters: bool = False) -> None:
    """Query indexes, counter triggers and the schema version.

    ``compute_counters``: fill the counter tables from the data first (after a bulk
    load without triggers). The schema version is written last, so a database
    whose rebuild was interrupted has none and is rebuilt again.
    """
    with db.atomic():
        for sql in QUERY_INDEXES:
            db.execute_sql(sql)
        if compute_counters:
            compute_counter_tables(db)
        for sql in COUNTER_TRIGGERS:
            db.execute_sql(sql)
        if db.execute_sql("SELECT count(*) FROM schema_version").fetchone()[0] == 0:
            db.execute_sql("INSERT INTO schema_version(version) VALUES (?)", (SCHEMA_VERSION,))


def compute_counter_tables(db: pw.SqliteDatabase) -> None:
    """Fill the counter tables from scratch (same sums as COUNTER_QUERIES).

    Aggregates in Python: SQLite's GROUP BY sorts every row first, which over
    millions of read marks costs several times more than a dict.
    """
    conn = db.connection()
    for table in COUNTER_QUERIES:
        conn.execute(f"DELETE FROM {table}")
    by_author = Counter(conn.execute("SELECT agent_id, sig_id FROM messages WHERE deleted = 0"))
    conn.executemany("INSERT INTO sig_author_totals(author, sig_id, n) VALUES (?,?,?)",
                     [(a, s, n) for (a, s), n in by_author.items()])
    by_sig: Counter = Counter()
    for (_, s), n in by_author.items():
        by_sig[s] += n
    conn.executemany("INSERT INTO sig_totals(sig_id, n) VALUES (?,?)", list(by_sig.items()))
    reads = Counter(conn.execute(
        "SELECT r.agent_id, m.sig_id, r.agent_id = m.agent_id FROM read_state r "
        "JOIN messages m ON m.message_id = r.message_id WHERE r.is_read = 1 AND m.deleted = 0"))
    archived: Counter = Counter()
    archived_read: Counter = Counter()
    for agent, sig, own, is_read in conn.execute(
            "SELECT x.agent_id, m.sig_id, x.agent_id = m.agent_id, EXISTS (SELECT 1 FROM read_state r "
            "WHERE r.message_id = x.message_id AND r.agent_id = x.agent_id AND r.is_read = 1) "
            "FROM archive_marks x JOIN messages m ON m.message_id = x.message_id WHERE m.deleted = 0"):
        archived[(agent, sig, own)] += 1
        archived_read[(agent, sig, own)] += is_read
    conn.executemany(
        "INSERT INTO agent_sig_counts(agent_id, sig_id, own, n_read, n_arch, n_read_arch) VALUES (?,?,?,?,?,?)",
        [k + (reads[k], archived[k], archived_read[k]) for k in set(reads) | set(archived)])


def schema_version(db: pw.SqliteDatabase) -> int | None:
    """The version recorded in the database, or None when it has no (or a broken) schema."""
    try:
        row = db.execute_sql("SELECT max(version) FROM schema_version").fetchone()
    except pw.DatabaseError:
        return None
    return row[0] if row else None


def drop_schema(db: pw.SqliteDatabase) -> None:
    """Drop every view and table (their indexes and triggers go with them)."""
    objects = db.execute_sql(
        "SELECT type, name FROM sqlite_master WHERE type IN ('view', 'table') AND name NOT LIKE 'sqlite_%' "
        "ORDER BY type = 'table'").fetchall()
    with db.atomic():
        for kind, name in objects:
            db.execute_sql(f'DROP {kind.upper()} IF EXISTS "{name}"')

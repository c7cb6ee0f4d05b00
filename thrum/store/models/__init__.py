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

The tables live in one module per kind: `messages`, `inbox` (mention sets and
counters), `directory` (agents, sessions, groups, threads) and `bookkeeping`
(the projection's own state). This module assembles the schema from them: the
tables, the view, the indexes and `SCHEMA_VERSION`.

Everything here can be thrown away and rebuilt from the log: bump
`SCHEMA_VERSION` whenever a table changes and the daemon rebuilds on start.
"""

from __future__ import annotations

import peewee as pw

from .bookkeeping import (
    AppliedEvent,
    ChainFault,
    ChainLink,
    ChainSpan,
    FoldIssue,
    HeldLine,
    IdempotencyKey,
    KeyValue,
    LogPosition,
    SchemaVersion,
)
from .directory import Agent, AgentContext, Group, GroupMember, Session, Thread
from .inbox import AgentSigCount, MentionSig, MentionSigTarget, SigAuthorTotal, SigTotal
from .messages import (
    AckRequest,
    ArchiveMark,
    DeleteEvent,
    Delivery,
    EditEvent,
    Message,
    MessageEdit,
    MessageRead,
    MessageRef,
    MessageScope,
    PendingTarget,
    ReadState,
    ThreadSubject,
)

SCHEMA_VERSION = 14  # 5: applied_events keyed by event id and author (store.fold.dedup_key);
#                    6: message_scopes/message_refs.pos (the order given); 7: messages.subject; 8: idempotency_keys;
#                    9: held_lines (events dated ahead), agents.cleanup_by, sessions keyed by id and agent;
#                   10: ack_requests, deliveries (docs/design/delivery.md);
#                   11: the search index (message_search, thread_subjects, messages.search_tags/search_parts)
#                   12: chain_links, chain_spans, chain_faults (per-writer chains, issue 25)
#                   13: agents.last_seen_at folded from the log (thrum.presence), no longer local liveness
#                   14: the search index built as one segment on FTS5's top level (store.search_index._fill_on_top):
#                       an index built before sat on level 0, merged whole at the 4th, 16th, 64th... commit

TABLE_MODELS: list[type[pw.Model]] = [
    Message,
    MessageScope,
    MessageRef,
    MessageEdit,
    ReadState,
    ArchiveMark,
    EditEvent,
    DeleteEvent,
    PendingTarget,
    AckRequest,
    Delivery,
    ThreadSubject,
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
    HeldLine,
    SchemaVersion,
    KeyValue,
    IdempotencyKey,
    ChainLink,
    ChainSpan,
    ChainFault,
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
    "CREATE INDEX IF NOT EXISTS idx_deliveries_agent ON deliveries (agent_id, message_id)",
    "CREATE INDEX IF NOT EXISTS idx_ack_requests_due ON ack_requests (due_key) WHERE due_key <> ''",
]

INDEXES = FOLD_INDEXES + QUERY_INDEXES

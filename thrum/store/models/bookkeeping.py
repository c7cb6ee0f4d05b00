"""The projection's own bookkeeping: applied event ids, log positions, refused lines, schema version, small state.

None of it is a fact of the log; it says how far the projection has got and
what it refused (`FoldIssue`, for `sync status`), and keeps the index of the
clients' idempotency keys (`thrum.store.idempotency`).
"""

from __future__ import annotations

import peewee as pw

from .base import Base


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
    """A line or event the fold refused: malformed, forged, conflicting. Kept for `sync status`;
    one row per line up to a bound per kind, then a count per file and kind (store/issues.py)."""

    key = pw.TextField(primary_key=True)  # stable: shard + event_id or line digest
    kind = pw.TextField()  # malformed | forged | conflict
    shard = pw.TextField()
    event_id = pw.TextField(default="")
    reason = pw.TextField()
    seen_at = pw.TextField()
    count = pw.IntegerField(null=True)  # NULL: one line; else lines of this kind and file past the bound

    class Meta:
        table_name = "fold_issues"
        indexes = ((("kind", "count"), False),)


class HeldLine(Base):
    """A line dated ahead of this replica's clock, held until its time comes (store/held.py)."""

    key = pw.TextField(primary_key=True)  # the key of its fold issue: future:shard:event_id
    shard = pw.TextField()
    event_id = pw.TextField()
    due = pw.IntegerField(index=True)  # the time it carries, in ms
    line = pw.BlobField()

    class Meta:
        table_name = "held_lines"


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


class ChainLink(Base):
    """Every event of a signer's chain this replica applied (store/chain_fold.py): two rows at
    one position are a fork; a ``prev`` matching no event before it is a broken link."""

    signer = pw.TextField()
    seq = pw.IntegerField()
    hash = pw.TextField()  # trust.chains.sig_hash of the event
    prev = pw.TextField()
    event_id = pw.TextField()

    class Meta:
        table_name = "chain_links"
        primary_key = pw.CompositeKey("signer", "seq", "hash")
        without_rowid = True


class ChainSpan(Base):
    """The positions of each signer's chain held here ("1-407,410"): gaps without a scan."""

    signer = pw.TextField(primary_key=True)
    spans = pw.TextField()
    high = pw.IntegerField()

    class Meta:
        table_name = "chain_spans"


class ChainFault(Base):
    """A contradiction in a signer's chain, with its evidence (store/chain_fold.py)."""

    key = pw.TextField(primary_key=True)  # kind:signer:seq:event_id
    kind = pw.TextField()  # fork | broken-link
    signer = pw.TextField()
    seq = pw.IntegerField()
    event_id = pw.TextField()
    other = pw.TextField()  # the event(s) it contradicts
    detail = pw.TextField()
    seen_at = pw.TextField()

    class Meta:
        table_name = "chain_faults"
        indexes = ((("signer", "seq"), False),)

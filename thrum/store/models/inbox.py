"""The tables that make the inbox fast: mention sets and the counters kept per set.

A message points at its mention set (`MentionSig`: the sorted targets it
mentions); the inbox finds an agent's sets once and counts through them. The
counter tables are sums over messages, read state and archive marks, kept by
triggers (`thrum.store.counters`).
"""

from __future__ import annotations

import peewee as pw

from .base import Base


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

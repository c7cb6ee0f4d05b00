"""The message tables: messages, their scopes and refs, edits, read and archive marks, raw edit and delete events.

The tables named in spec/messaging-cli.md keep their spec names and columns
(messages, message_scopes, message_refs, message_edits; message_reads is a view
over read_state, see `MessageRead`). The rest hold what the fold needs to stay
order-independent: the raw edit and delete events a message is recomputed from,
last-writer-wins read state, and the ids edits and deletes named before their
message arrived.
"""

from __future__ import annotations

import peewee as pw

from .base import Base


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
    search_tags = pw.TextField(default="")  # for the search index: scope and ref values (store/search_text.py)
    search_parts = pw.TextField(default="")  # for the search index: parts of the body's CamelCase words

    class Meta:
        table_name = "messages"
        indexes = ()


def _tag_table(class_name: str, table: str, kind: str) -> type[Base]:
    """A message's scopes or refs: one row per ``{type, value}`` tag, with the position the
    author gave it (``pos``: not in the spec's table; ``message get`` shows them in order).
    The two tables differ only in their names and the prefix of two columns."""
    meta = type(
        "Meta",
        (),
        {
            "table_name": table,
            "primary_key": pw.CompositeKey("message_id", f"{kind}_type", f"{kind}_value"),
            "without_rowid": True,
        },
    )
    fields = {
        "message_id": pw.TextField(),
        f"{kind}_type": pw.TextField(),
        f"{kind}_value": pw.TextField(),
        "pos": pw.IntegerField(default=0),
        "Meta": meta,
        "__module__": __name__,
    }
    return type(class_name, (Base,), fields)


MessageScope = _tag_table("MessageScope", "message_scopes", "scope")
MessageRef = _tag_table("MessageRef", "message_refs", "ref")


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


class ThreadSubject(Base):
    """A thread's subject (its first live message's that has one), for the search index (store/search_index.py)."""

    thread_id = pw.TextField(primary_key=True)
    subject = pw.TextField()

    class Meta:
        table_name = "thread_subjects"
        without_rowid = True


class PendingTarget(Base):
    """Message ids that edit or delete events name before the message arrived."""

    message_id = pw.TextField(primary_key=True)

    class Meta:
        table_name = "pending_targets"
        without_rowid = True


class AckRequest(Base):
    """Messages whose sender asked each recipient for an acknowledgement (message.create's
    ``ack``), with the deadline when there is one: ``due_key`` is the time key of
    created_at + ``within`` seconds, '' for no deadline."""

    message_id = pw.TextField(primary_key=True)
    within = pw.IntegerField(default=0)
    due_key = pw.TextField(default="")

    class Meta:
        table_name = "ack_requests"
        without_rowid = True


class Delivery(Base):
    """Per message and agent: when it was first delivered, surfaced and acked (and last
    surfaced), from the agent's receipts (docs/design/delivery.md).

    Each state keeps the event with the lowest event_id (the last surfacing: the
    highest), so any order of arrival gives the same row. ``*_key`` are time keys of
    the ``*_at`` timestamps (comparable with `AckRequest.due_key`). Read comes from
    `ReadState`, where it already is.
    """

    message_id = pw.TextField()
    agent_id = pw.TextField()
    delivered_at = pw.TextField(null=True)
    delivered_eid = pw.TextField(null=True)
    surfaced_at = pw.TextField(null=True)
    surfaced_eid = pw.TextField(null=True)
    surfaced_via = pw.TextField(null=True)
    last_surfaced_key = pw.TextField(null=True)
    last_surfaced_eid = pw.TextField(null=True)
    acked_at = pw.TextField(null=True)
    acked_eid = pw.TextField(null=True)

    class Meta:
        table_name = "deliveries"
        primary_key = pw.CompositeKey("message_id", "agent_id")
        without_rowid = True

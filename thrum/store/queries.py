"""The read side of the projection: inbox, messages, threads, counts.

Agents, sessions, groups and addresses are in `thrum.store.directory`.

Rules:

1. Every function takes the peewee ``SqliteDatabase`` first, uses raw SQL, and
   returns plain JSON-able values (the RPC layer sends them as they are).
2. Read-time resolution: who a mention reaches is decided when the query runs,
   from the current agents and groups. A message mentions agent A when one of
   its ``mention`` refs is A's name, A's role, ``everyone``, or an existing group
   that has A or A's role as a member (`mention_targets`). An agent that joins a
   group later sees the messages sent to the group before it joined.
3. State comes from the order-independent tables only: ``read_state`` (last
   writer wins) for read/unread, ``archive_marks`` for archive, the group member
   rule (a member counts when its latest event is an add newer than the group's
   latest create), agents deleted when their latest cleanup is newer than their
   latest register.
4. Speed: messages carry the id of their mention set (``sig_id``); per mention
   set the database keeps counts of live messages and, per agent, of those it
   read or archived (kept by triggers, see `counters.COUNTER_TRIGGERS`). An inbox
   query resolves the agent's targets to the mention sets that contain one of
   them, takes ``total`` and ``unread`` from those counters, and fetches only the
   page: walking the time index newest first (when matches are dense) or starting
   from the mention refs (when they are sparse), stopping as soon as the page is
   full because the exact count is known. Filters the counters cannot answer (scope,
   ref, thread, another author) are counted with SQL instead; the results are
   the same either way (tests compare both paths).

Where each part lives: `thrum.store.inbox` (message.list, counts, paging: the
planner), `thrum.store.messages` (items, message.get, threads, the facts the
RPC layer checks before it writes), `thrum.store.mentions` (who a mention
reaches). This module names the entry points callers use.
"""

from __future__ import annotations

from .inbox import counts, list_messages, sent_messages, unread_after, unread_ids
from .inbox_filter import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from .mailboxes import MAILBOX_MAX_PAGE, mailbox_list, mailbox_states
from .mentions import mention_targets, role_targets, targets_of
from .messages import (
    also_read_by,
    archived_ids,
    created_at,
    get_message,
    mention_values,
    message_heads,
    message_routing,
    read_flags,
    thread_list,
    thread_messages,
    thread_summary,
)

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAILBOX_MAX_PAGE",
    "MAX_PAGE_SIZE",
    "also_read_by",
    "archived_ids",
    "counts",
    "created_at",
    "get_message",
    "list_messages",
    "mailbox_list",
    "mailbox_states",
    "mention_targets",
    "mention_values",
    "message_heads",
    "message_routing",
    "read_flags",
    "role_targets",
    "sent_messages",
    "targets_of",
    "thread_list",
    "thread_messages",
    "thread_summary",
    "unread_after",
    "unread_ids",
]

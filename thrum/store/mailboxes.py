"""Shared mailboxes: one read and archive state kept by several agents (Gas City mail).

An agent's key never leaves its machine, so no single agent can act for a
mailbox on every machine of a team. A mailbox ``N`` is therefore a name that mail
mentions (a ``mention`` ref ``N``), kept by the agent ``N`` if there is one and by
the agents *named* for it (rule 4 of thrum/gcmail/addresses.py: ``gcr_<tag>_…`` and
``gck_<tag>_…``, one per machine, registered with module ``N``). A name is bound to
its key (trust on first use), so the state is bound to the keys of those agents; an
agent that merely claims ``module = N`` keeps nothing (issue 31).

Rules:

1. A mailbox holds the live messages that mention ``N`` by that exact name (not
   through a role, group or ``everyone``).
2. A message is read in the mailbox when the latest read/unread mark (by
   event_id) among the mailbox's agents is a read; archived when any of them
   archived it. Both come from the order-independent tables (``read_state``,
   ``archive_marks``), so they replicate and survive a rebuild like any mark.
3. The state of a message in its mailboxes (`mailbox_states`) is over the agents
   of every name it mentions.
"""

from __future__ import annotations

import math
from fnmatch import fnmatchcase
from typing import Any

import peewee as pw

from ..gcmail.addresses import keeper_glob
from .messages import message_items
from .sql import all_rows, chunks, qmarks, rows_in

MAILBOX_MAX_PAGE = 1000  # a mailbox view is read whole by a short-lived process: few, large pages
_KEEPERS = "(SELECT ? UNION SELECT agent_id FROM agents WHERE module = ? AND agent_id GLOB ?)"
_MAILBOX_READ = (
    f"coalesce((SELECT r.is_read FROM read_state r WHERE r.message_id = m.message_id "
    f"AND r.agent_id IN {_KEEPERS} ORDER BY r.event_id DESC LIMIT 1), 0)"
)
_MAILBOX_ARCHIVED = (
    f"EXISTS (SELECT 1 FROM archive_marks x WHERE x.message_id = m.message_id AND x.agent_id IN {_KEEPERS})"
)


def mailbox_list(
    db: pw.SqliteDatabase,
    mailbox: str,
    *,
    unread_only: bool = False,
    page: int = 1,
    page_size: int = 100,
    newest_first: bool = False,
) -> dict[str, Any]:
    """The un-archived messages of mailbox ``mailbox`` (only the unread with
    ``unread_only``), oldest first unless ``newest_first``, as message.list's result;
    ``is_read`` of each item is the mailbox's."""
    rows = all_rows(
        db,
        f"SELECT m.created_key, m.message_id, {_MAILBOX_READ} FROM messages m "
        f"WHERE m.message_id IN (SELECT message_id FROM message_refs WHERE ref_type = 'mention' "
        f"AND ref_value IN (?, ?)) AND m.deleted = 0 AND NOT {_MAILBOX_ARCHIVED}",
        (mailbox, mailbox, keeper_glob(mailbox), mailbox, "@" + mailbox, mailbox, mailbox, keeper_glob(mailbox)),
    )
    rows.sort(reverse=newest_first)
    unread = sum(1 for r in rows if not r[2])
    if unread_only:
        rows = [r for r in rows if not r[2]]
    total = len(rows)
    shown = rows[(page - 1) * page_size : page * page_size]
    items = message_items(db, [r[1] for r in shown], None)
    read = {r[1] for r in shown if r[2]}
    for item in items:
        item["is_read"] = item["message_id"] in read
    return {
        "messages": items,
        "total": total,
        "unread": unread,
        "page": page,
        "page_size": page_size,
        "total_pages": math.ceil(total / page_size) if total else 0,
    }


def mailbox_states(db: pw.SqliteDatabase, ids: list[str]) -> dict[str, dict[str, bool]]:
    """``{message_id: {"read", "archived"}}``: each message's state in the mailboxes it mentions."""
    mentions: dict[str, set[str]] = {}
    for mid, value in rows_in(
        db, "SELECT message_id, ref_value FROM message_refs WHERE ref_type = 'mention' AND message_id IN ({q})", ids
    ):
        mentions.setdefault(mid, set()).add(value[1:] if value.startswith("@") else value)
    names = sorted({n for found in mentions.values() for n in found})
    keepers: dict[str, set[str]] = {n: {n} for n in names}
    for chunk in chunks(names):
        for agent, module in all_rows(
            db, f"SELECT agent_id, module FROM agents WHERE module IN ({qmarks(len(chunk))})", list(chunk)
        ):
            if fnmatchcase(agent, keeper_glob(module) or "\0"):
                keepers[module].add(agent)
    out: dict[str, dict[str, bool]] = {mid: {"read": False, "archived": False} for mid in ids}
    latest: dict[str, str] = {}
    for mid, agent, is_read, event_id in rows_in(
        db, "SELECT message_id, agent_id, is_read, event_id FROM read_state WHERE message_id IN ({q})", ids
    ):
        if any(agent in keepers[n] for n in mentions.get(mid, ())) and event_id > latest.get(mid, ""):
            latest[mid] = event_id
            out[mid]["read"] = bool(is_read)
    for mid, agent in rows_in(db, "SELECT message_id, agent_id FROM archive_marks WHERE message_id IN ({q})", ids):
        if any(agent in keepers[n] for n in mentions.get(mid, ())):
            out[mid]["archived"] = True
    return out

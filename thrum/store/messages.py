"""Messages as the RPC layer shows them: items, message.get, threads, and the facts writes check.

Every function takes the peewee ``SqliteDatabase`` first and returns plain
JSON-able values (the rules of `thrum.store.queries` hold). Read state comes
from ``read_state`` (last writer wins), so ``is_read`` and ``read_by`` are
what the agents' latest marks say; an agent's own messages are always read to it
(``is_read`` true for their author, whatever the marks say).
"""

from __future__ import annotations

from typing import Any, Sequence

import peewee as pw

from ..errors import NotFound
from ..events.ids import time_key
from .sql import Row, all_rows, chunks, one_row, qmarks, rows_in

PREVIEW_CHARS = 100
_MESSAGE_COLUMNS = (
    "message_id, agent_id, session_id, thread_id, body_format, body_content, body_structured, "
    "priority, created_at, updated_at, deleted, edit_count, deleted_at, delete_reason, "
    "authored_by, disclosed, subject"
)


# --------------------------------------------------------------------------- items


def _tags_of(db: pw.SqliteDatabase, table: str, ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Scopes or refs of each message, in the order its author gave them."""
    col = "scope" if table == "message_scopes" else "ref"
    out: dict[str, list[dict[str, Any]]] = {}
    for mid, t, v in all_rows(
        db,
        f"SELECT message_id, {col}_type, {col}_value FROM {table} WHERE message_id IN "
        f"({qmarks(len(ids))}) ORDER BY message_id, pos, {col}_type, {col}_value",
        ids,
    ):
        out.setdefault(mid, []).append({"type": t, "value": v})
    return out


def _read_ids(db: pw.SqliteDatabase, ids: Sequence[str], agent: str | None) -> set[str]:
    if not agent or not ids:
        return set()
    return {
        r[0]
        for r in all_rows(
            db,
            f"SELECT message_id FROM read_state WHERE message_id IN ({qmarks(len(ids))}) "
            f"AND agent_id = ? AND is_read = 1",
            [*ids, agent],
        )
    }


def _rows_by_id(db: pw.SqliteDatabase, ids: Sequence[str]) -> dict[str, Row]:
    return {
        r[0]: r
        for r in all_rows(db, f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE message_id IN ({qmarks(len(ids))})", ids)
    }


def message_items(db: pw.SqliteDatabase, ids: list[str], viewer: str | None) -> list[dict[str, Any]]:
    """message.list items for ``ids`` (in that order)."""
    out = []
    for chunk in chunks(ids, 500):
        rows = _rows_by_id(db, chunk)
        scopes = _tags_of(db, "message_scopes", chunk)
        refs = _tags_of(db, "message_refs", chunk)
        read = _read_ids(db, chunk, viewer)
        acks = ack_requests(db, chunk)
        for mid in chunk:
            row = rows.get(mid)
            if row is not None:
                item = _item(row, scopes.get(mid, []), refs.get(mid, []), mid in read or row[1] == viewer)
                item["ack"] = acks.get(mid)
                out.append(item)
    return out


def ack_requests(db: pw.SqliteDatabase, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The ack each of ``ids`` asks its recipients for: ``{within, due}`` (None: no deadline)."""
    return {
        mid: {"within": within or None, "due": due or None}
        for mid, within, due in all_rows(
            db, f"SELECT message_id, within, due_key FROM ack_requests WHERE message_id IN ({qmarks(len(ids))})", ids
        )
    }


def _item(row: Row, scopes: list[dict[str, Any]], refs: list[dict[str, Any]], is_read: bool) -> dict[str, Any]:
    (mid, agent, session, thread, fmt, content, structured, priority, created_at, updated_at, deleted, edits) = row[:12]
    return {
        "message_id": mid,
        "agent_id": agent,
        "session_id": session,
        "thread_id": thread or "",
        "body": {"format": fmt, "content": content, "structured": structured or ""},
        "scopes": scopes,
        "refs": refs,
        "priority": priority,
        "created_at": created_at,
        "updated_at": updated_at or "",
        "deleted": bool(deleted),
        "is_read": is_read,
        "edited": edits > 0,
        "version": edits,
        "reply_to": next((r["value"] for r in refs if r["type"] == "reply_to"), ""),
        "subject": row[16] or "",
    }


def read_by(db: pw.SqliteDatabase, ids: list[str]) -> dict[str, list[str]]:
    """For each message that has any, the agents that currently have it read (sorted)."""
    out: dict[str, list[str]] = {}
    for mid, agent in rows_in(
        db,
        "SELECT message_id, agent_id FROM read_state WHERE message_id IN ({q}) AND is_read = 1 ORDER BY agent_id",
        ids,
    ):
        out.setdefault(mid, []).append(agent)
    return out


def get_message(db: pw.SqliteDatabase, message_id: str, viewer: str | None = None) -> dict[str, Any]:
    """spec message.get: the message with scopes, refs, edit and delete metadata,
    ``version`` (number of edits), ``is_read`` for ``viewer``, ``edits`` and ``read_by``.

    Raises:
        NotFound: no such message.
    """
    rows = _rows_by_id(db, [message_id]) if isinstance(message_id, str) and message_id else {}
    row = rows.get(message_id)
    if row is None:
        raise NotFound(f"message {message_id} not found")
    scopes = _tags_of(db, "message_scopes", [message_id]).get(message_id, [])
    refs = _tags_of(db, "message_refs", [message_id]).get(message_id, [])
    item = _item(row, scopes, refs, row[1] == viewer or message_id in _read_ids(db, [message_id], viewer))
    deleted_at, delete_reason, authored_by, disclosed = row[12:16]
    edits = [
        {"edited_at": at, "edited_by": by, "old_content": old or "", "new_content": new or ""}
        for at, by, old, new in all_rows(
            db,
            "SELECT edited_at, edited_by, old_content, new_content "
            "FROM message_edits WHERE message_id = ? ORDER BY event_id, id",
            (message_id,),
        )
    ]
    message = {
        "message_id": message_id,
        "author": {"agent_id": item["agent_id"], "session_id": item["session_id"]},
        "subject": item["subject"],
        "body": item["body"],
        "scopes": scopes,
        "refs": refs,
        "metadata": {"deleted_at": deleted_at or "", "delete_reason": delete_reason or ""},
        "created_at": item["created_at"],
        "updated_at": item["updated_at"],
        "deleted": item["deleted"],
        "thread_id": item["thread_id"],
        "priority": item["priority"],
        "version": item["version"],
        "edited": item["edited"],
        "reply_to": item["reply_to"],
        "is_read": item["is_read"],
        "authored_by": authored_by or "",
        "disclosed": bool(disclosed),
        "edits": edits,
        "read_by": read_by(db, [message_id]).get(message_id, []),
    }
    return {"message": message}


def also_read_by(db: pw.SqliteDatabase, message_ids: list[str], agent: str) -> dict[str, list[str]]:
    """For each message, the other agents that currently have it read (messages with none are left out)."""
    ids = list(dict.fromkeys(m for m in message_ids if isinstance(m, str)))
    return {
        mid: [a for a in agents if a != agent]
        for mid, agents in read_by(db, ids).items()
        if any(a != agent for a in agents)
    }


# --------------------------------------------------------------------------- threads


def _thread_of(db: pw.SqliteDatabase, thread_or_message_id: str) -> tuple[str, str] | None:
    """("thread", thread_id) or ("replies", root message id) for a thread or message id."""
    if not isinstance(thread_or_message_id, str) or not thread_or_message_id:
        return None
    x = thread_or_message_id
    if one_row(db, "SELECT 1 FROM messages WHERE thread_id = ? AND thread_id <> '' LIMIT 1", (x,)) or one_row(
        db, "SELECT 1 FROM threads WHERE thread_id = ?", (x,)
    ):
        return ("thread", x)
    row = one_row(db, "SELECT thread_id FROM messages WHERE message_id = ?", (x,))
    if row is None:
        return None
    if row[0]:
        return ("thread", row[0])
    seen = {x}  # climb reply_to refs to the root of the reply tree
    while True:
        parent = one_row(
            db,
            "SELECT r.ref_value FROM message_refs r JOIN messages p ON p.message_id = r.ref_value "
            "WHERE r.message_id = ? AND r.ref_type = 'reply_to' ORDER BY r.ref_value LIMIT 1",
            (x,),
        )
        if parent is None or parent[0] in seen or len(seen) > 10_000:
            return ("replies", x)
        x = parent[0]
        seen.add(x)


def _thread_ids(db: pw.SqliteDatabase, thread_or_message_id: str, include_deleted: bool) -> list[str]:
    found = _thread_of(db, thread_or_message_id)
    if found is None:
        return []
    live = "" if include_deleted else " AND deleted = 0"
    kind, key = found
    if kind == "thread":
        return [
            r[0]
            for r in all_rows(
                db,
                f"SELECT message_id FROM messages WHERE thread_id = ? "
                f"AND thread_id <> ''{live} ORDER BY created_key, message_id",
                (key,),
            )
        ]
    ids, frontier = {key}, [key]  # the root, replies to it (transitively), and messages threaded under it
    while frontier and len(ids) < 100_000:
        nxt = [
            r[0]
            for r in rows_in(
                db, "SELECT message_id FROM message_refs WHERE ref_type = 'reply_to' AND ref_value IN ({q})", frontier
            )
            if r[0] not in ids
        ]
        nxt += (
            [
                r[0]
                for r in all_rows(db, "SELECT message_id FROM messages WHERE thread_id = ? AND thread_id <> ''", (key,))
                if r[0] not in ids
            ]
            if frontier == [key]
            else []
        )
        ids.update(nxt)
        frontier = list(dict.fromkeys(nxt))
    ordered = rows_in(db, "SELECT created_key, message_id FROM messages WHERE message_id IN ({q})" + live, sorted(ids))
    return [mid for _, mid in sorted(ordered)]


def thread_messages(
    db: pw.SqliteDatabase, thread_or_message_id: str, viewer: str | None = None, *, include_deleted: bool = False
) -> list[dict[str, Any]]:
    """Messages of a thread, oldest first, as message.list items.

    Accepts a thread id or the id of any message in it. A message without a
    thread id stands for its reply tree: the root reached through ``reply_to``
    refs and every reply below it. Unknown ids give []. Each item also has
    ``read_by`` (the agents that have it read), so a thread shows every
    recipient's read state (the Gas City provider reports the addressee's).
    """
    items = message_items(db, _thread_ids(db, thread_or_message_id, include_deleted), viewer)
    readers: dict[str, list[str]] = {}
    for chunk in chunks([m["message_id"] for m in items], 500):
        readers.update(read_by(db, list(chunk)))
    for m in items:
        m["read_by"] = readers.get(m["message_id"], [])
    return items


def thread_list(db: pw.SqliteDatabase, agent: str, *, page: int = 1, page_size: int = 10) -> dict[str, Any]:
    """``agent``'s threads, newest activity first: those with a live message of its own
    or one by another agent it has not archived (its inbox), one page.

    Each thread: ``message_count`` (live messages, as `thread show` lists them),
    ``unread_count`` (others' messages it has neither read nor archived), the
    first ``subject`` in it, and its newest message's time, author and preview.
    """
    groups = all_rows(
        db,
        "SELECT m.thread_id, max(m.updated_key) AS last, count(*), "
        "coalesce(sum(m.agent_id <> ? AND NOT EXISTS (SELECT 1 FROM read_state r WHERE r.message_id = m.message_id "
        "AND r.agent_id = ? AND r.is_read = 1) AND NOT EXISTS (SELECT 1 FROM archive_marks x "
        "WHERE x.message_id = m.message_id AND x.agent_id = ?)), 0), "
        "coalesce(sum(m.agent_id = ? OR NOT EXISTS (SELECT 1 FROM archive_marks x "
        "WHERE x.message_id = m.message_id AND x.agent_id = ?)), 0) AS visible "
        "FROM messages m WHERE m.deleted = 0 AND m.thread_id <> '' GROUP BY m.thread_id HAVING visible > 0 "
        "ORDER BY last DESC, m.thread_id DESC",
        (agent,) * 5,
    )
    total = len(groups)
    threads = []
    for thread_id, _last, count, unread, _visible in groups[(page - 1) * page_size : page * page_size]:
        newest = one_row(
            db,
            "SELECT agent_id, body_content, coalesce(nullif(updated_at, ''), created_at) "
            "FROM messages WHERE thread_id = ? AND deleted = 0 "
            "ORDER BY updated_key DESC, message_id DESC LIMIT 1",
            (thread_id,),
        )
        subject = one_row(
            db,
            "SELECT subject FROM messages WHERE thread_id = ? AND deleted = 0 AND subject <> '' "
            "ORDER BY created_key, message_id LIMIT 1",
            (thread_id,),
        )
        author, content, when = newest if newest else ("", "", "")
        threads.append(
            {
                "thread_id": thread_id,
                "subject": subject[0] if subject else "",
                "message_count": count,
                "unread_count": unread,
                "last_activity": when,
                "last_sender": author,
                "preview": (content or "")[:PREVIEW_CHARS],
            }
        )
    return {
        "threads": threads,
        "total": total,
        "page": page,
        "page_size": page_size,
        "total_pages": -(-total // page_size) if total else 0,
    }


def thread_summary(db: pw.SqliteDatabase, thread_id: str, viewer: str | None) -> dict[str, Any] | None:
    """The thread.updated notification payload for ``viewer`` (None for an empty thread).

    ``unread_count`` leaves out the viewer's own messages.
    """
    ids = _thread_ids(db, thread_id, False)
    if not ids:
        return None
    rows = _rows_by_id(db, ids)
    ordered = [rows[i] for i in ids if i in rows]
    read = set()
    for chunk in chunks(ids, 500):
        read |= _read_ids(db, chunk, viewer)
    last = ordered[-1]
    last_activity = max(((time_key(r[9] or r[8]), r[9] or r[8]) for r in ordered))[1]
    return {
        "thread_id": thread_id,
        "message_count": len(ordered),
        "unread_count": sum(1 for r in ordered if r[0] not in read and r[1] != viewer),
        "last_activity": last_activity,
        "last_sender": last[1],
        "preview": last[5][:PREVIEW_CHARS],
    }


# --------------------------------------------------------------------------- facts the RPC layer and the hub check


def message_heads(db: pw.SqliteDatabase, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Author, deleted flag and thread of every existing message among ``ids``
    (what edit, delete, reply and the receipts check before they write)."""
    return {
        mid: {"agent_id": agent, "deleted": bool(deleted), "thread_id": thread}
        for mid, agent, deleted, thread in rows_in(
            db, "SELECT message_id, agent_id, deleted, thread_id FROM messages WHERE message_id IN ({q})", ids
        )
    }


def read_flags(db: pw.SqliteDatabase, agent: str, ids: list[str]) -> dict[str, bool]:
    """``agent``'s read state of the messages among ``ids`` that have one."""
    return {
        mid: bool(r)
        for mid, r in rows_in(
            db, "SELECT message_id, is_read FROM read_state WHERE agent_id=? AND message_id IN ({q})", ids, (agent,)
        )
    }


def archived_ids(db: pw.SqliteDatabase, agent: str, ids: list[str]) -> set[str]:
    """The messages among ``ids`` that ``agent`` archived."""
    return {
        r[0]
        for r in rows_in(
            db, "SELECT message_id FROM archive_marks WHERE agent_id=? AND message_id IN ({q})", ids, (agent,)
        )
    }


def message_routing(db: pw.SqliteDatabase, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Thread, author, scopes and refs of messages: what subscription filters match on."""
    out: dict[str, dict[str, Any]] = {}
    for mid, thread, agent in rows_in(
        db, "SELECT message_id, thread_id, agent_id FROM messages WHERE message_id IN ({q})", ids
    ):
        out[mid] = {"scopes": [], "refs": [], "thread_id": thread, "agent_id": agent}
    for mid, t, v in rows_in(
        db, "SELECT message_id, scope_type, scope_value FROM message_scopes WHERE message_id IN ({q})", ids
    ):
        if mid in out:
            out[mid]["scopes"].append({"type": t, "value": v})
    for mid, t, v in rows_in(
        db, "SELECT message_id, ref_type, ref_value FROM message_refs WHERE message_id IN ({q})", ids
    ):
        if mid in out:
            out[mid]["refs"].append({"type": t, "value": v})
    return out


def created_at(db: pw.SqliteDatabase, message_id: str) -> str | None:
    """When a message was created (as its author wrote it), or None when there is no such message."""
    r = one_row(db, "SELECT created_at FROM messages WHERE message_id=?", (message_id,))
    return r[0] if r else None

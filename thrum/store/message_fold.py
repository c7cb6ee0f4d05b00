"""The message lifecycle in the fold: create, edit, delete, and what a message looks like after them.

Rules (part of the projection's rules, `thrum.store.projection`):

- Of two creates for one message id the lowest event_id wins; the other is a
  conflict, recorded and counted, never applied.
- Edits and deletes are stored as events (``edit_events``, ``delete_events``)
  and the message is recomputed from all of them (`recompute`), so their
  arrival order does not matter: concurrent edits resolve last-writer-wins by
  event_id, the first delete is final and edits after it are ignored. Only the
  author's edits and deletes count; others are recorded as forged.
- An edit or delete that arrives before its message waits in
  ``pending_targets`` and takes effect when the message arrives.
- Read, unread and archive marks (`receipt`): the last mark wins per (message,
  agent) by event_id, and the first archive stays.

Each function takes the running fold transaction (`thrum.store.fold.Folder`).
"""

from __future__ import annotations

from contextlib import ExitStack
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..events import time_key
from . import search_index
from .counters import BULK_INSERT_ROWS, bulk_message_insert
from .delivery_fold import sync_ack_requests
from .search_text import SKIPPED_REF_TYPES, camel_parts, tag_text
from . import sql as sql_helpers
from .sql import chunks, qmarks

if TYPE_CHECKING:
    from .fold import Folder


def message_create(f: Folder, batch: list[dict[str, Any]]) -> set[str]:
    """Insert new messages; returns the event ids applied now (not duplicates), when the fold
    keeps them (`Folder.keep_applied`; a rebuild does not).

    Optimistic: the batch (its own id conflicts resolved first) is inserted with
    INSERT OR IGNORE; only when some id already existed are those looked at.
    """
    batch.sort(key=_EVENT_ID)
    first: dict[str, dict[str, Any]] = {}
    later: list[dict[str, Any]] = []
    asking: list[dict[str, Any]] = []
    for d in batch:  # lowest event_id first: the first create of an id in the batch wins within it
        mid = d["message_id"]
        if mid in first:
            later.append(d)
        else:
            first[mid] = d
        if d.get("ack"):
            asking.append(d)
    rows, scopes, refs = _message_rows(f, list(first.values()))
    max_rowid = f.c.execute("SELECT coalesce(max(rowid), 0) FROM messages").fetchone()[0]
    with ExitStack() as bulk:
        if len(rows) >= BULK_INSERT_ROWS:  # counters and search entries added set-wise after the rows
            bulk.enter_context(bulk_message_insert(f.c, max_rowid))
            bulk.enter_context(search_index.bulk_insert(f.c, max_rowid))
        inserted = f.c.executemany(
            "INSERT OR IGNORE INTO messages(message_id, agent_id, session_id, created_at, body_format, "
            "body_content, body_structured, thread_id, priority, authored_by, disclosed, event_id, created_key, "
            "updated_key, sig_id, subject, search_tags, search_parts, deleted, edit_count) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,0)",
            rows,
        ).rowcount
    # What the batch applied (the fold publishes it; a rebuild does not keep it: `Folder.keep_applied`).
    applied = {d["event_id"] for d in first.values()} if f.keep_applied else set()
    pending: set[str] = set()
    if inserted != len(rows):  # some ids were already there: sort those out one by one
        clashing = _clashing(f, first, max_rowid)
        scopes = [s for s in scopes if s[0] not in clashing]
        refs = [r for r in refs if r[0] not in clashing]
        for mid, (old_eid, old_author) in clashing.items():
            d = first[mid]
            if old_eid == d["event_id"] or _applied(f, d["event_id"]):
                f.r.duplicates += 1
                applied.discard(d["event_id"])
            elif old_eid < d["event_id"]:
                _create_conflict(f, d)
            else:  # an earlier create for this id arrived late: it wins
                f.issue("conflict", f"messages/{old_author}", old_eid, f"message.create reuses message id {mid}")
                f.r.conflicts += 1
                f.c.execute("INSERT OR IGNORE INTO applied_events(event_id) VALUES (?)", (old_eid,))
                for table in ("messages", "message_scopes", "message_refs", "message_edits", "ack_requests"):
                    f.c.execute(f"DELETE FROM {table} WHERE message_id=?", (mid,))
                row, s_rows, r_rows = _message_rows(f, [d])
                f.c.executemany(
                    "INSERT INTO messages(message_id, agent_id, session_id, created_at, body_format, "
                    "body_content, body_structured, thread_id, priority, authored_by, disclosed, event_id, "
                    "created_key, updated_key, sig_id, subject, search_tags, search_parts, deleted, edit_count) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,0)",
                    row,
                )
                scopes += s_rows
                refs += r_rows
                pending.add(mid)
    for d in later:  # losers of a conflict inside this batch
        if _applied(f, d["event_id"]):
            f.r.duplicates += 1
        else:
            applied.add(d["event_id"])
            _create_conflict(f, d)
    if scopes:
        f.c.executemany(
            "INSERT OR IGNORE INTO message_scopes(message_id, scope_type, scope_value, pos) VALUES (?,?,?,?)", scopes
        )
    if refs:
        f.c.executemany(
            "INSERT OR IGNORE INTO message_refs(message_id, ref_type, ref_value, pos) VALUES (?,?,?,?)", refs
        )
    # Edits or deletes that arrived before their message (pending_targets) take effect now.
    if f.c.execute("SELECT 1 FROM pending_targets LIMIT 1").fetchone() is not None:
        for chunk in chunks(list(first)):
            found = [
                r[0]
                for r in f.c.execute(
                    f"SELECT message_id FROM pending_targets WHERE message_id IN ({qmarks(len(chunk))})", chunk
                )
            ]
            pending.update(found)
            f.c.executemany("DELETE FROM pending_targets WHERE message_id = ?", [(m,) for m in found])
    for mid in sorted(pending):
        recompute(f, mid)
    if asking:
        sync_ack_requests(f, asking)
    return applied


_EVENT_ID = itemgetter("event_id")
MessageRow = tuple[Any, ...]  # the values of one INSERT INTO messages, in its column order
TagRow = tuple[str, str, str, int]  # (message_id, type, value, pos) of a scope or a ref


def _message_rows(f: Folder, creates: list[dict[str, Any]]) -> tuple[list[MessageRow], list[TagRow], list[TagRow]]:
    """The rows of ``creates`` for messages, message_scopes and message_refs.

    A rebuild calls this for every message (~5 µs of Python each, the largest share of
    the fold's own work), so the loop is written for it: one pass over the refs for their
    rows, the mention set and the search tags, the mention set's id looked up by the
    mentions as written (`Folder.mentions_sig`), the time key taken as it is when the
    timestamp is already in its form (`time_key`)."""
    rows: list[MessageRow] = []
    scopes: list[TagRow] = []
    refs: list[TagRow] = []
    add_row, add_scope, add_ref = rows.append, scopes.append, refs.append
    sig_of = f.mentions_sig
    skipped = SKIPPED_REF_TYPES
    for d in creates:
        mid = d["message_id"]
        body = d["body"]
        ts = d["timestamp"]
        key = ts if len(ts) == 24 and ts[23] == "Z" and ts[19] == "." else time_key(ts)
        tags: list[str] = []  # the values the search index holds for this message (search_text.tag_text)
        for pos, s in enumerate(d["scopes"]):
            value = s["value"]
            add_scope((mid, s["type"], value, pos))
            tags.append(value)
        mentions: list[str] = []
        for pos, ref in enumerate(d["refs"]):
            kind, value = ref["type"], ref["value"]
            add_ref((mid, kind, value, pos))
            if kind == "mention":
                mentions.append(value)
                tags.append(value)
            elif kind not in skipped:
                tags.append(value)
        add_row(
            (
                mid,
                d["agent_id"],
                d["session_id"],
                ts,
                body["format"],
                body["content"],
                body["structured"],
                d["thread_id"],
                d["priority"],
                d["authored_by"],
                1 if d["disclosed"] else 0,
                d["event_id"],
                key,
                key,
                sig_of(tuple(mentions)),
                d.get("subject") or "",
                tag_text(tags),
                camel_parts(body["content"]),
            )
        )
    return rows, scopes, refs


def _clashing(f: Folder, first: dict[str, dict[str, Any]], max_rowid: int) -> dict[str, tuple[str, str]]:
    """Ids of ``first`` that were already in messages (rows up to ``max_rowid``): id -> (event_id, author)."""
    out: dict[str, tuple[str, str]] = {}
    mids = list(first)
    for chunk in chunks(mids):
        for mid, eid, author in f.c.execute(
            f"SELECT message_id, event_id, agent_id FROM messages WHERE rowid <= ? AND message_id IN "
            f"({qmarks(len(chunk))})",
            [max_rowid, *chunk],
        ):
            out[mid] = (eid, author)
    return out


def _applied(f: Folder, event_id: str) -> bool:
    return f.c.execute("SELECT 1 FROM applied_events WHERE event_id = ?", (event_id,)).fetchone() is not None


def _create_conflict(f: Folder, d: dict[str, Any]) -> None:
    f.r.conflicts += 1
    f.c.execute("INSERT OR IGNORE INTO applied_events(event_id) VALUES (?)", (d["event_id"],))
    f.issue(
        "conflict", f"messages/{d['agent_id']}", d["event_id"], f"message.create reuses message id {d['message_id']}"
    )


def message_edit(f: Folder, batch: list[dict[str, Any]]) -> None:
    f.c.executemany(
        "INSERT OR IGNORE INTO edit_events(event_id, message_id, agent_id, session_id, timestamp, "
        "body_format, body_content, body_structured) VALUES (?,?,?,?,?,?,?,?)",
        [
            (
                d["event_id"],
                d["message_id"],
                d["agent_id"],
                d["session_id"],
                d["timestamp"],
                d["body"]["format"],
                d["body"]["content"],
                d["body"]["structured"],
            )
            for d in batch
        ],
    )
    _recompute_existing(f, {d["message_id"] for d in batch})


def message_delete(f: Folder, batch: list[dict[str, Any]]) -> None:
    f.c.executemany(
        "INSERT OR IGNORE INTO delete_events(event_id, message_id, agent_id, timestamp, reason) VALUES (?,?,?,?,?)",
        [(d["event_id"], d["message_id"], d["agent_id"], d["timestamp"], d["reason"]) for d in batch],
    )
    _recompute_existing(f, {d["message_id"] for d in batch})


def _recompute_existing(f: Folder, targets: set[str]) -> None:
    mids = sorted(targets)
    present: set[str] = set()
    for chunk in chunks(mids):
        present.update(
            r[0]
            for r in f.c.execute(f"SELECT message_id FROM messages WHERE message_id IN ({qmarks(len(chunk))})", chunk)
        )
    for mid in mids:
        if mid in present:
            recompute(f, mid)
    missing = [(m,) for m in mids if m not in present]
    if missing:  # recomputed when the message arrives (message_create)
        f.c.executemany("INSERT OR IGNORE INTO pending_targets(message_id) VALUES (?)", missing)


def recompute(f: Folder, mid: str) -> None:
    """Derive a message's current body, edit history and delete state from its events."""
    row = f.c.execute(
        "SELECT agent_id, body_format, body_content, body_structured, edit_count, created_key "
        "FROM messages WHERE message_id=?",
        (mid,),
    ).fetchone()
    if row is None:
        return
    author, fmt, content, structured, edit_count, created_key = row
    if edit_count:
        first = f.c.execute(
            "SELECT old_format, old_content, old_structured FROM message_edits "
            "WHERE message_id=? ORDER BY event_id, id LIMIT 1",
            (mid,),
        ).fetchone()
        if first is not None:
            fmt, content, structured = first
    deleted = None
    for eid, ts, reason, agent in f.c.execute(
        "SELECT event_id, timestamp, reason, agent_id FROM delete_events WHERE message_id=? ORDER BY event_id", (mid,)
    ).fetchall():
        if agent != author:
            if f.issue("forged", f"messages/{agent}", eid, f"{agent} may not delete {mid} (author {author})"):
                f.r.forged += 1
        elif deleted is None:
            deleted = (eid, ts, reason)
    edits = []
    for e in f.c.execute(
        "SELECT event_id, agent_id, session_id, timestamp, body_format, body_content, body_structured "
        "FROM edit_events WHERE message_id=? ORDER BY event_id",
        (mid,),
    ).fetchall():
        if e[1] != author:
            if f.issue("forged", f"messages/{e[1]}", e[0], f"{e[1]} may not edit {mid} (author {author})"):
                f.r.forged += 1
        elif deleted is None or e[0] < deleted[0]:
            edits.append(e)
    f.c.execute("DELETE FROM message_edits WHERE message_id=?", (mid,))
    cur = (fmt, content, structured)
    updated_at = None
    for eid, agent, sid, ts, nfmt, ncontent, nstructured in edits:
        f.c.execute(
            "INSERT INTO message_edits(message_id, edited_at, edited_by, old_content, new_content, "
            "old_structured, new_structured, old_format, new_format, session_id, event_id) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (mid, ts, agent, cur[1], ncontent, cur[2], nstructured, cur[0], nfmt, sid, eid),
        )
        cur = (nfmt, ncontent, nstructured)
        updated_at = ts
    f.c.execute(
        "UPDATE messages SET body_format=?, body_content=?, body_structured=?, search_parts=?, updated_at=?, "
        "updated_key=?, edit_count=?, deleted=?, deleted_at=?, delete_reason=? WHERE message_id=?",
        (
            cur[0],
            cur[1],
            cur[2],
            camel_parts(cur[1]),
            updated_at,
            time_key(updated_at) if updated_at else created_key,
            len(edits),
            1 if deleted else 0,
            deleted[1] if deleted else None,
            deleted[2] if deleted else None,
            mid,
        ),
    )


# --------------------------------------------------------------------------- receipts


# Last writer wins per (message, agent) and the first archive stays: both are decided by the
# upserts' WHERE clauses (by event_id), so marks may go in in any order.
_READ_STATE = "INSERT INTO read_state(message_id, agent_id, is_read, event_id, at, session_id) "
_READ_STATE_WINS = (
    " ON CONFLICT(message_id, agent_id) DO UPDATE SET is_read=excluded.is_read, "
    "event_id=excluded.event_id, at=excluded.at, session_id=excluded.session_id "
    "WHERE excluded.event_id > read_state.event_id"
)
_ARCHIVE = "INSERT INTO archive_marks(message_id, agent_id, event_id, archived_at) "
_ARCHIVE_WINS = (
    " ON CONFLICT(message_id, agent_id) DO UPDATE SET event_id=excluded.event_id, "
    "archived_at=excluded.archived_at WHERE excluded.event_id < archive_marks.event_id"
)
# One statement a receipt: its message ids as a JSON array, the rest bound once for all of them.
_READ_STATE_EACH = _READ_STATE + "SELECT value, ?2, ?3, ?4, ?5, ?6 FROM json_each(?1) WHERE true" + _READ_STATE_WINS
_ARCHIVE_EACH = _ARCHIVE + "SELECT value, ?2, ?3, ?4 FROM json_each(?1) WHERE true" + _ARCHIVE_WINS


def receipt(f: Folder, batch: list[dict[str, Any]]) -> None:
    """Read, unread and archive marks: one upsert per message a receipt names.

    A rebuild folds hundreds of thousands of marks, and a receipt names up to 10,000
    messages with one agent, event and time. So each receipt is one statement, its ids
    read by SQLite from one JSON array (``json_each``) and the rest bound once (binding
    six values a mark was half of what a mark cost), and the receipts go in the order of
    their first message, near the table's key order (SQLite writes a run of rows in key
    order far more cheaply than scattered ones). Where SQLite has no JSON functions,
    `receipt_marks` binds every mark: the same rows (tests/store/test_receipt_paths.py).
    """
    if not sql_helpers.JSON_EACH:
        receipt_marks(f, batch)
        return
    ordered = sorted(batch, key=_first_message) if len(batch) > 1 else batch
    dumps = ev.dumps
    # Generators: each array is made as its statement runs, not all held at once.
    states = (
        (
            dumps(d["message_ids"]).decode(),
            d["agent_id"],
            1 if t == "message.read" else 0,
            d["event_id"],
            d["timestamp"],
            d["session_id"],
        )
        for d in ordered
        if (t := d["type"]) != "message.archive"
    )
    f.c.executemany(_READ_STATE_EACH, states)
    archives = (
        (dumps(d["message_ids"]).decode(), d["agent_id"], d["event_id"], d["timestamp"])
        for d in ordered
        if d["type"] == "message.archive"
    )
    f.c.executemany(_ARCHIVE_EACH, archives)


def receipt_marks(f: Folder, batch: list[dict[str, Any]]) -> None:
    """`receipt` with every mark a row of its own, in key order."""
    states, archives = [], []
    for d in batch:
        agent, ts, eid = d["agent_id"], d["timestamp"], d["event_id"]
        if d["type"] == "message.archive":
            archives += [(mid, agent, eid, ts) for mid in d["message_ids"]]
        else:
            is_read, sid = (1 if d["type"] == "message.read" else 0), d["session_id"]
            states += [(mid, agent, is_read, eid, ts, sid) for mid in d["message_ids"]]
    if states:
        states.sort()
        f.c.executemany(_READ_STATE + "VALUES (?,?,?,?,?,?)" + _READ_STATE_WINS, states)
    if archives:
        archives.sort()
        f.c.executemany(_ARCHIVE + "VALUES (?,?,?,?)" + _ARCHIVE_WINS, archives)


def _first_message(d: dict[str, Any]) -> str:
    ids = d["message_ids"]
    return ids[0] if ids else ""

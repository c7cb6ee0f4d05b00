"""Idempotency keys in the projection: which write a client's key named.

The key travels in the event itself (``message.create`` / ``message.edit``), so
the log, the truth, remembers every key for as long as it keeps the event: a
retry is recognised after a restart, a rebuild, even on another replica. This
table is the index the daemon looks keys up in; the fold fills it
(`index_keys`), a rebuild refills it. Per agent: two agents may use the same key.

Order-independent like the rest of the fold: of two events with the same
(agent, key) the lowest event_id is "the first write".
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any, NotRequired, TypedDict

import peewee as pw

KEYED_TYPES = ("message.create", "message.edit")


class KeyedWrite(TypedDict):
    """The first write an agent made with a key (`lookup`): what it was, and what it returned."""

    kind: str  # one of KEYED_TYPES
    event_id: str
    message_id: str
    digest: str  # `content_digest` of what it said
    # message.create:
    thread_id: NotRequired[str]
    created_at: NotRequired[str]
    session_id: NotRequired[str]
    # message.edit (updated_at None: an edit the fold set aside made no version):
    version: NotRequired[int]
    updated_at: NotRequired[str | None]


def content_digest(content: str) -> str:
    """What a key's first write said, to refuse the key's reuse for a different message."""
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def index_keys(conn: sqlite3.Connection, events: list[dict[str, Any]]) -> None:
    """Record the keys of newly folded events (inside the fold's transaction)."""
    rows = [
        (
            d["agent_id"],
            d["idempotency_key"],
            d["type"],
            d["event_id"],
            d["message_id"],
            content_digest(d["body"]["content"]),
        )
        for d in events
        if d.get("idempotency_key") and d.get("type") in KEYED_TYPES
    ]
    if rows:
        conn.executemany(
            "INSERT INTO idempotency_keys(agent_id, key, kind, event_id, message_id, digest) VALUES (?,?,?,?,?,?) "
            "ON CONFLICT(agent_id, key) DO UPDATE SET kind=excluded.kind, event_id=excluded.event_id, "
            "message_id=excluded.message_id, digest=excluded.digest "
            "WHERE excluded.event_id < idempotency_keys.event_id",
            rows,
        )


def lookup(db: pw.SqliteDatabase, agent: str, key: str) -> KeyedWrite | None:
    """The first write an agent made with ``key`` and what it returned, or None.

    ``message.create``: the message's id, thread, creation time and session.
    ``message.edit``: the message's id, the version that edit made and its time.
    """
    row = db.execute_sql(
        "SELECT kind, event_id, message_id, digest FROM idempotency_keys WHERE agent_id=? AND key=?", (agent, key)
    ).fetchone()
    if row is None:
        return None
    kind, event_id, message_id, digest = row
    out: KeyedWrite = {"kind": kind, "event_id": event_id, "message_id": message_id, "digest": digest}
    if kind == "message.create":
        msg = db.execute_sql(
            "SELECT thread_id, created_at, session_id FROM messages WHERE message_id=?", (message_id,)
        ).fetchone()
        if msg is None:
            return None  # the key's message lost its id to an older create: not this write's result
        out.update({"thread_id": msg[0] or "", "created_at": msg[1], "session_id": msg[2]})
    else:
        edit = db.execute_sql(
            "SELECT (SELECT count(*) FROM message_edits e2 WHERE e2.message_id = e.message_id "
            "AND e2.event_id <= e.event_id), e.edited_at FROM message_edits e WHERE e.event_id=?",
            (event_id,),
        ).fetchone()
        if edit is None:  # an edit the fold set aside (after a delete): it made no version
            edit = (
                db.execute_sql("SELECT count(*) FROM message_edits WHERE message_id=?", (message_id,)).fetchone()[0],
                None,
            )
        out.update({"version": edit[0], "updated_at": edit[1]})
    return out

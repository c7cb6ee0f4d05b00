"""Delivery states in the fold: ack requests, and the delivered / surfaced / acked receipts.

Rules (docs/design/delivery.md; part of the projection's rules, `thrum.store.projection`):

- A ``message.create`` that asks for an ack (``ack``, ``ack_within``) gives its
  message an ``ack_requests`` row, kept only while that create is the message's
  winning create (the lowest event_id; `sync_ack_requests`).
- ``message.delivered``, ``message.surfaced`` and ``message.acked`` are receipts of
  the agent in their stream (the shard rule lets no one else write them). Each
  fills one state of the (message, agent) row in ``deliveries`` with the event of
  the lowest event_id; ``message.surfaced`` also keeps the highest as the last
  surfacing. The upserts decide by event_id, so events may arrive in any order, and
  a receipt for a message that has not arrived yet waits in its row.

Each function takes the running fold transaction (`thrum.store.fold.Folder`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..events.ids import parse_time, time_key
from . import sql as sql_helpers
from .sql import chunks, qmarks

if TYPE_CHECKING:
    from .fold import Folder


def due_key(timestamp: str, within: int) -> str:
    """The time key of ``timestamp`` + ``within`` seconds ('' for no deadline or an unreadable time)."""
    if not within:
        return ""
    try:
        due = parse_time(timestamp) + timedelta(seconds=within)
    except (ValueError, OverflowError):
        return ""
    return time_key(due.strftime("%Y-%m-%dT%H:%M:%S.") + f"{due.microsecond // 1000:03d}Z")


def sync_ack_requests(f: Folder, creates: list[dict[str, Any]]) -> None:
    """Give each message of ``creates`` the ack request of its winning create (or none).

    Called after the creates were inserted, with every create of the batch: a
    create that lost (or a late create that won) is sorted out by comparing with
    the message row's event_id.
    """
    mids = sorted({d["message_id"] for d in creates})
    if not mids:
        return
    winners: dict[str, str] = {}
    for chunk in chunks(mids):
        winners.update(
            f.c.execute(
                f"SELECT message_id, event_id FROM messages WHERE message_id IN ({qmarks(len(chunk))})", chunk
            ).fetchall()
        )
    keep, drop = [], []
    for d in creates:
        if winners.get(d["message_id"]) != d["event_id"]:
            continue
        if d.get("ack"):
            within = int(d.get("ack_within") or 0)
            keep.append((d["message_id"], within, due_key(d["timestamp"], within)))
        else:
            drop.append((d["message_id"],))
    if drop:
        f.c.executemany("DELETE FROM ack_requests WHERE message_id = ?", drop)
    if keep:
        f.c.executemany("INSERT OR REPLACE INTO ack_requests(message_id, within, due_key) VALUES (?,?,?)", keep)


_FIRST = (
    "CASE WHEN deliveries.{c}_eid IS NULL OR excluded.{c}_eid < deliveries.{c}_eid "
    "THEN excluded.{x} ELSE deliveries.{x} END"
)


def _first(state: str, *columns: str) -> str:
    """SET clauses keeping the values of the event with the lowest event_id for ``state``."""
    return ", ".join(f"{x} = " + _FIRST.format(c=state, x=x) for x in columns)


_DELIVERED = "INSERT INTO deliveries(message_id, agent_id, delivered_at, delivered_eid) "
_DELIVERED_WINS = " ON CONFLICT(message_id, agent_id) DO UPDATE SET " + _first(
    "delivered", "delivered_at", "delivered_eid"
)
_ACKED = "INSERT INTO deliveries(message_id, agent_id, acked_at, acked_eid) "
_ACKED_WINS = " ON CONFLICT(message_id, agent_id) DO UPDATE SET " + _first("acked", "acked_at", "acked_eid")
_SURFACED = (
    "INSERT INTO deliveries(message_id, agent_id, surfaced_at, surfaced_eid, surfaced_via, last_surfaced_key, "
    "last_surfaced_eid) "
)
_SURFACED_WINS = (
    " ON CONFLICT(message_id, agent_id) DO UPDATE SET "
    + _first("surfaced", "surfaced_at", "surfaced_via", "surfaced_eid")
    + ", last_surfaced_key = CASE WHEN deliveries.last_surfaced_eid IS NULL OR excluded.last_surfaced_eid > "
    "deliveries.last_surfaced_eid THEN excluded.last_surfaced_key ELSE deliveries.last_surfaced_key END"
    ", last_surfaced_eid = CASE WHEN deliveries.last_surfaced_eid IS NULL OR excluded.last_surfaced_eid > "
    "deliveries.last_surfaced_eid THEN excluded.last_surfaced_eid ELSE deliveries.last_surfaced_eid END"
)
# One statement a receipt, its message ids one JSON array (as `message_fold.receipt` does).
_EACH = {
    "message.delivered": _DELIVERED + "SELECT value, ?2, ?3, ?4 FROM json_each(?1) WHERE true" + _DELIVERED_WINS,
    "message.surfaced": _SURFACED
    + "SELECT value, ?2, ?3, ?4, ?5, ?6, ?4 FROM json_each(?1) WHERE true"
    + _SURFACED_WINS,
    "message.acked": _ACKED + "SELECT value, ?2, ?3, ?4 FROM json_each(?1) WHERE true" + _ACKED_WINS,
}


def delivery_receipt(f: Folder, batch: list[dict[str, Any]]) -> None:
    """message.delivered / message.surfaced / message.acked: one row state per (message, agent).

    Every CASE of an upsert's SET compares with the row as it was before the update, and
    each state has columns of its own, so receipts may go in in any order: one statement
    a receipt, its ids one JSON array, in the order of their first message (why:
    `message_fold.receipt`); `delivery_marks` where SQLite has no JSON functions."""
    if not sql_helpers.JSON_EACH:
        delivery_marks(f, batch)
        return
    ordered = sorted(batch, key=lambda d: d["message_ids"][:1]) if len(batch) > 1 else batch
    dumps = ev.dumps
    for kind, statement in _EACH.items():
        rows = (
            (dumps(d["message_ids"]).decode(), d["agent_id"], d["timestamp"], d["event_id"])
            + ((d.get("via") or "", time_key(d["timestamp"])) if kind == "message.surfaced" else ())
            for d in ordered
            if d["type"] == kind
        )
        f.c.executemany(statement, rows)


def delivery_marks(f: Folder, batch: list[dict[str, Any]]) -> None:
    """`delivery_receipt` with every mark a row of its own."""
    delivered, surfaced, acked = [], [], []
    for d in batch:
        agent, ts, eid = d["agent_id"], d["timestamp"], d["event_id"]
        if d["type"] == "message.surfaced":
            via, key = d.get("via") or "", time_key(ts)
            surfaced += [(mid, agent, ts, eid, via, key, eid) for mid in d["message_ids"]]
        elif d["type"] == "message.acked":
            acked += [(mid, agent, ts, eid) for mid in d["message_ids"]]
        else:
            delivered += [(mid, agent, ts, eid) for mid in d["message_ids"]]
    for statement, rows in (
        (_DELIVERED + "VALUES (?,?,?,?)" + _DELIVERED_WINS, delivered),
        (_SURFACED + "VALUES (?,?,?,?,?,?,?)" + _SURFACED_WINS, surfaced),
        (_ACKED + "VALUES (?,?,?,?)" + _ACKED_WINS, acked),
    ):
        if rows:
            f.c.executemany(statement, rows)

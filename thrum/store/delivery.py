"""Delivery states as the RPC layer shows them: per recipient, what to surface next, who has acked.

A message's *recipients* are the agents its mention refs reach when the query
runs (an agent, every agent of a role, a group's members expanded, ``everyone``),
less its author, plus any agent that recorded a delivery state for it. Each
recipient's state is the highest it reached (docs/design/delivery.md):

    sent → delivered → surfaced → read → acked

``read`` is the agent's current read mark (``read_state``); the others come from
``deliveries``, kept by `thrum.store.delivery_fold`. Times are the events'
timestamps as written. Rules of `thrum.store.queries` hold: the database first,
plain JSON-able values out.
"""

from __future__ import annotations

from typing import Any, Sequence

import peewee as pw

from ..errors import Forbidden
from .inbox_filter import paging
from .addresses import resolve_address
from .directory import bare_name, get_agent, group_members, list_agents
from .mentions import mention_targets, sigs_for
from .messages import message_items
from .sql import all_rows, chunks, qmarks, rows_in, scalar

STATES = ("sent", "delivered", "surfaced", "read", "acked")
URGENT_PRIORITIES = ("critical", "high")
RECENT_DAYS = 7  # the delivered sweep at start-up looks back this far


# --------------------------------------------------------------------------- recipients


def _reached(db: pw.SqliteDatabase, value: str, cache: dict[str, list[str]]) -> list[str]:
    """The live agents a mention value reaches now (cached per call)."""
    name = bare_name(value)
    if name not in cache:
        hit = resolve_address(db, name) if name else None
        if hit is None:
            cache[name] = []
        elif hit[0] == "agent":
            cache[name] = [name]
        elif hit[0] == "role":
            cache[name] = [a["name"] for a in list_agents(db, role=name)["agents"]]
        else:  # a group, or everyone
            cache[name] = [m["value"] for m in group_members(db, name, expand=True)]
    return cache[name]


def recipients(db: pw.SqliteDatabase, message_ids: Sequence[str]) -> dict[str, list[str]]:
    """For each message: the agents it is addressed to now (sorted, author left out)."""
    authors: dict[str, str] = dict(
        rows_in(db, "SELECT message_id, agent_id FROM messages WHERE message_id IN ({q})", message_ids)
    )
    cache: dict[str, list[str]] = {}
    out: dict[str, set[str]] = {mid: set() for mid in authors}
    for mid, value in rows_in(
        db,
        "SELECT message_id, ref_value FROM message_refs WHERE ref_type = 'mention' AND message_id IN ({q})",
        message_ids,
    ):
        if mid in out:
            out[mid].update(_reached(db, value, cache))
    return {mid: sorted(names - {authors[mid]}) for mid, names in out.items()}


# --------------------------------------------------------------------------- states


def _ack_requests(db: pw.SqliteDatabase, ids: Sequence[str]) -> dict[str, tuple[int, str]]:
    return {
        mid: (within, due)
        for mid, within, due in rows_in(
            db, "SELECT message_id, within, due_key FROM ack_requests WHERE message_id IN ({q})", ids
        )
    }


def ack_info(request: tuple[int, str] | None, now_key: str) -> dict[str, Any] | None:
    """``{within, due, overdue}`` of an ack request (None when the sender asked for none)."""
    if request is None:
        return None
    within, due = request
    return {"within": within or None, "due": due or None, "overdue": bool(due) and due <= now_key}


def _state(row: dict[str, Any]) -> tuple[str, str | None]:
    for state in reversed(STATES[1:]):
        at = row.get(f"{state}_at")
        if at:
            return state, at
    return "sent", None


def delivery(db: pw.SqliteDatabase, message_ids: Sequence[str], now_key: str) -> dict[str, dict[str, Any]]:
    """For each existing message: ``{"ack": ack_info, "recipients": [{agent, state, at,
    delivered_at, surfaced_at, read_at, acked_at}]}``, recipients sorted by name."""
    ids = list(dict.fromkeys(message_ids))
    to = recipients(db, ids)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for mid, agent, delivered, surfaced, acked in rows_in(
        db,
        "SELECT message_id, agent_id, delivered_at, surfaced_at, acked_at FROM deliveries WHERE message_id IN ({q})",
        ids,
    ):
        rows[(mid, agent)] = {"delivered_at": delivered, "surfaced_at": surfaced, "acked_at": acked}
    for mid, agent, at in rows_in(
        db, "SELECT message_id, agent_id, at FROM read_state WHERE is_read = 1 AND message_id IN ({q})", ids
    ):
        rows.setdefault((mid, agent), {})["read_at"] = at
    requests = _ack_requests(db, ids)
    out: dict[str, dict[str, Any]] = {}
    for mid, names in to.items():
        agents = set(names) | {a for (m, a) in rows if m == mid and "delivered_at" in rows[(m, a)]}
        listed = []
        for agent in sorted(agents):
            row = rows.get((mid, agent), {})
            state, at = _state(row)
            listed.append(
                {
                    "agent": agent,
                    "state": state,
                    "at": at,
                    **{f"{s}_at": row.get(f"{s}_at") for s in STATES[1:]},
                }
            )
        out[mid] = {"ack": ack_info(requests.get(mid), now_key), "recipients": listed}
    return out


def with_delivery(db: pw.SqliteDatabase, items: list[dict[str, Any]], now_key: str) -> list[dict[str, Any]]:
    """``items`` (messages, with ``message_id``) each given ``ack`` and ``delivery`` (its recipients), in place."""
    found = delivery(db, [m["message_id"] for m in items], now_key)
    for m in items:
        d = found.get(m["message_id"], {"ack": None, "recipients": []})
        m["ack"] = d["ack"]
        m["delivery"] = d["recipients"]
    return items


# --------------------------------------------------------------------------- what to surface next


_LIVE_UNREAD = (
    "m.deleted = 0 AND m.agent_id <> ?1 "
    "AND NOT EXISTS (SELECT 1 FROM read_state r WHERE r.message_id = m.message_id AND r.agent_id = ?1 "
    "AND r.is_read = 1) "
    "AND NOT EXISTS (SELECT 1 FROM archive_marks x WHERE x.message_id = m.message_id AND x.agent_id = ?1)"
)


def pending(
    db: pw.SqliteDatabase, agent: str, *, limit: int, now_key: str, arriving: Sequence[str] = ()
) -> dict[str, Any]:
    """What a hook should put in ``agent``'s context next, oldest first.

    ``messages``: up to ``limit`` messages delivered to the agent and never surfaced to
    it (and neither read, archived nor deleted), then those whose ack is overdue
    and that were not surfaced since their deadline (``overdue: true``), each a
    message.list item with ``ack``, ``urgent`` (the Stop rule: a direct mention, high
    or critical priority, an ack asked for) and ``overdue``. ``total`` counts all of them.
    ``arriving``: messages being recorded as delivered to the agent in the same write
    as what the caller does with this answer (they have no delivery state yet); they
    count as delivered.
    """
    fresh_sql = (
        "FROM deliveries d JOIN messages m ON m.message_id = d.message_id "
        f"WHERE d.agent_id = ?1 AND d.surfaced_eid IS NULL AND d.delivered_eid IS NOT NULL AND {_LIVE_UNREAD}"
    )
    fresh_total = scalar(db, f"SELECT count(*) {fresh_sql}", (agent,))
    fresh = [
        (r[1], r[0])
        for r in all_rows(
            db,
            f"SELECT m.message_id, m.created_key {fresh_sql} ORDER BY m.created_key, m.message_id LIMIT ?2",
            (agent, limit),
        )
    ]
    if arriving:
        known = {mid for _, mid in fresh}
        new = [
            (r[1], r[0])
            for r in rows_in(
                db,
                f"SELECT m.message_id, m.created_key FROM messages m WHERE {_LIVE_UNREAD} AND m.message_id IN ({{q}})",
                list(arriving),
                (agent,),
            )
            if r[0] not in known
        ]
        fresh_total += len(new)
        fresh = sorted(fresh + new)[:limit]
    fresh_ids = [mid for _, mid in fresh]
    overdue_sql = (
        "FROM ack_requests a JOIN deliveries d ON d.message_id = a.message_id AND d.agent_id = ?1 "
        "JOIN messages m ON m.message_id = a.message_id "
        "WHERE a.due_key <> '' AND a.due_key <= ?2 AND d.acked_eid IS NULL AND m.deleted = 0 AND m.agent_id <> ?1 "
        "AND d.surfaced_eid IS NOT NULL AND (d.last_surfaced_key IS NULL OR d.last_surfaced_key < a.due_key) "
        "AND NOT EXISTS (SELECT 1 FROM archive_marks x WHERE x.message_id = m.message_id AND x.agent_id = ?1)"
    )
    overdue_total = scalar(db, f"SELECT count(*) {overdue_sql}", (agent, now_key))
    room = max(0, limit - len(fresh_ids))
    overdue = (
        [
            r[0]
            for r in all_rows(
                db,
                f"SELECT m.message_id {overdue_sql} ORDER BY a.due_key, m.message_id LIMIT ?3",
                (agent, now_key, room),
            )
        ]
        if room
        else []
    )
    items = message_items(db, fresh_ids + overdue, agent)
    requests = _ack_requests(db, fresh_ids + overdue)
    late = set(overdue)
    for m in items:
        m["ack"] = ack_info(requests.get(m["message_id"]), now_key)
        m["overdue"] = m["message_id"] in late
        direct = any(r["type"] == "mention" and bare_name(r["value"]) == agent for r in m["refs"])
        m["urgent"] = bool(direct or m["priority"] in URGENT_PRIORITIES or m["ack"] or m["overdue"])
    return {"messages": items, "total": fresh_total + overdue_total}


# --------------------------------------------------------------------------- acks


def check_ackable(db: pw.SqliteDatabase, agent: str, message_ids: Sequence[str]) -> dict[str, list[str]]:
    """Sort ``message_ids`` (existing messages) for an ack by ``agent``: ``ack`` (to record),
    ``already`` (acked before).

    Raises:
        Forbidden: a message is the agent's own or not addressed to it.
    """
    to = recipients(db, message_ids)
    acked = {
        r[0]
        for r in rows_in(
            db,
            "SELECT message_id FROM deliveries WHERE agent_id = ? AND acked_eid IS NOT NULL AND message_id IN ({q})",
            message_ids,
            (agent,),
        )
    }
    refused = [mid for mid in message_ids if agent not in to.get(mid, [])]
    if refused:
        raise Forbidden(
            f"@{agent} cannot acknowledge {', '.join(refused[:5])}: not addressed to it (only a recipient acks)",
            data={"message_ids": refused},
        )
    return {"ack": [m for m in message_ids if m not in acked], "already": [m for m in message_ids if m in acked]}


def ack_state(db: pw.SqliteDatabase, message_id: str, now_key: str) -> dict[str, Any]:
    """Who has acked ``message_id`` and who has not yet (``thrum wait --acked``)."""
    d = delivery(db, [message_id], now_key).get(message_id, {"ack": None, "recipients": []})
    acked = [r["agent"] for r in d["recipients"] if r["acked_at"]]
    waiting = [r["agent"] for r in d["recipients"] if not r["acked_at"]]
    return {
        "message_id": message_id,
        "ack": d["ack"],
        "acked_by": acked,
        "waiting_for": waiting,
        "recipients": d["recipients"],
    }


def unacked_sent(db: pw.SqliteDatabase, agent: str, now_key: str, *, page: int, page_size: int) -> dict[str, Any]:
    """``agent``'s live messages that asked for an ack some recipient has not given, newest first
    (``thrum sent --unacked``); items as message.sent's, with ``ack`` and ``delivery``.

    Raises:
        ValidationError: a bad page or page_size.
    """
    page, page_size = paging(page, page_size, "created_at", "desc")
    candidates = [
        r[0]
        for r in all_rows(
            db,
            "SELECT m.message_id FROM ack_requests a JOIN messages m ON m.message_id = a.message_id "
            "WHERE m.agent_id = ? AND m.deleted = 0 ORDER BY m.created_key DESC, m.message_id DESC",
            (agent,),
        )
    ]
    found = delivery(db, candidates, now_key)
    open_ids = [mid for mid in candidates if any(not r["acked_at"] for r in found[mid]["recipients"])]
    total = len(open_ids)
    chosen = open_ids[(page - 1) * page_size : page * page_size]
    items = message_items(db, chosen, agent)
    for m in items:
        m["ack"] = found[m["message_id"]]["ack"]
        m["delivery"] = found[m["message_id"]]["recipients"]
    return {
        "messages": items,
        "total": total,
        "page": page,
        "page_size": page_size,
        "total_pages": -(-total // page_size) if total else 0,
    }


# --------------------------------------------------------------------------- what to record as delivered


def undelivered(
    db: pw.SqliteDatabase, agents: Sequence[str], message_ids: Sequence[str] | None, since_key: str
) -> dict[str, list[str]]:
    """For each of ``agents``: the messages (among ``message_ids``, or all created since
    ``since_key``) that mention it now, are not its own, are live, created since
    ``since_key``, unread by it and without any delivery state of it yet (a state
    above delivered implies it). Oldest first; at most 10,000 each."""
    out: dict[str, list[str]] = {}
    for agent in agents:
        if get_agent(db, agent) is None:
            continue  # a key without a live registration here: nobody to deliver to
        sigs = sigs_for(db, mention_targets(db, agent))
        if not sigs:
            continue
        sig_list = ",".join(str(int(s)) for s in sorted(sigs))
        base = (
            f"SELECT m.message_id FROM messages m WHERE m.sig_id IN ({sig_list}) AND m.deleted = 0 AND m.agent_id <> ? "
            "AND m.created_key >= ? AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message_id = m.message_id "
            "AND d.agent_id = ?3 AND (d.delivered_eid IS NOT NULL OR d.surfaced_eid IS NOT NULL "
            "OR d.acked_eid IS NOT NULL)) "
            "AND NOT EXISTS (SELECT 1 FROM read_state r WHERE r.message_id = m.message_id AND r.agent_id = ?3 "
            "AND r.is_read = 1)"
        )
        found: list[str] = []
        if message_ids is None:
            found = [
                r[0]
                for r in all_rows(
                    db, base + " ORDER BY m.created_key, m.message_id LIMIT 10000", (agent, since_key, agent)
                )
            ]
        else:
            for chunk in chunks(list(message_ids)):
                found += [
                    r[0]
                    for r in all_rows(
                        db, base + f" AND m.message_id IN ({qmarks(len(chunk))})", (agent, since_key, agent, *chunk)
                    )
                ]
        if found:
            out[agent] = found[:10_000]
    return out

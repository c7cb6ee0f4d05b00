"""The inbox planner: message.list's counts and paging, fast at a million messages.

An inbox query resolves the agent's targets to the mention sets that contain one
of them (`thrum.store.mentions`), takes ``total`` and ``unread`` from the
trigger-kept counters (`thrum.store.counters`), and fetches only the page:
walking the time index newest first (when matches are dense) or starting from
the mention refs (when they are sparse), stopping as soon as the page is full
because the exact count is known. Filters the counters cannot answer (scope,
ref, thread, another author) are counted with SQL instead; the results are the
same either way (tests compare both paths). The filters themselves (parameters
checked and turned into SQL) are `thrum.store.inbox_filter`.
"""

from __future__ import annotations

from typing import Any

import math

import peewee as pw

from ..errors import NotFound
from ..events.ids import time_key
from .inbox_filter import DEFAULT_PAGE_SIZE, SORT_KEYS, Filter, build_filter, paging, sig_clause
from .messages import created_at, message_items, read_by
from .sql import all_rows, qmarks, scalar

ONE_PASS_MAX = 50_000  # a filter with at most this many candidates is counted and paged in one scan
SORT_INDEXES = {"created_at": "idx_messages_time", "updated_at": "idx_messages_updated"}


# --------------------------------------------------------------------------- counting and paging


def _counter_counts(db: pw.SqliteDatabase, f: Filter) -> tuple[int, int, int]:
    """(total, unread, live messages in the mention sets) from the counter tables."""
    sig_sql = sig_clause(f.sigs)
    in_sigs = scalar(db, f"SELECT coalesce(sum(n), 0) FROM sig_totals WHERE 1{sig_sql}")
    total = in_sigs
    if f.author_id is not None:
        total = scalar(
            db, f"SELECT coalesce(sum(n), 0) FROM sig_author_totals WHERE author = ?{sig_sql}", (f.author_id,)
        )
    elif f.exclude_author is not None:
        total -= scalar(
            db, f"SELECT coalesce(sum(n), 0) FROM sig_author_totals WHERE author = ?{sig_sql}", (f.exclude_author,)
        )
    if f.viewer is None:
        return total, total, in_sigs
    # the viewer's own messages count as read (whatever its marks say), others' when marked
    n_read = n_arch = n_read_arch = 0
    own_arch = 0
    for own, r, a, ra in all_rows(
        db,
        f"SELECT own, sum(n_read), sum(n_arch), sum(n_read_arch) FROM agent_sig_counts "
        f"WHERE agent_id = ?{sig_sql} GROUP BY own",
        (f.viewer,),
    ):
        if (own and f.exclude_author is not None) or (not own and f.author_id is not None):
            continue
        n_arch += a
        if own:
            own_arch += a
        else:
            n_read, n_read_arch = n_read + r, n_read_arch + ra
    own_total = 0
    if f.exclude_author is None:  # countable(): author_id is None or the viewer
        own_total = scalar(
            db, f"SELECT coalesce(sum(n), 0) FROM sig_author_totals WHERE author = ?{sig_sql}", (f.viewer,)
        )
    if f.hide_archived:
        total -= n_arch
        n_read -= n_read_arch
        own_total -= own_arch
    unread = total - n_read - own_total
    if f.unread_for is not None:
        total = unread
    return total, unread, in_sigs


def _sql_counts(db: pw.SqliteDatabase, f: Filter) -> tuple[int, int]:
    where, params = f.where()
    if f.viewer is None or f.unread_for == f.viewer:
        n = scalar(db, f"SELECT count(*) FROM messages m WHERE {where}", params)
        return n, n
    unread_sql = (
        "m.agent_id <> ? AND NOT EXISTS (SELECT 1 FROM read_state r WHERE r.message_id = m.message_id "
        "AND r.agent_id = ? AND r.is_read = 1)"
    )
    total, unread = all_rows(
        db,
        f"SELECT count(*), coalesce(sum({unread_sql}), 0) FROM messages m WHERE {where}",
        [f.viewer, f.viewer] + params,
    )[0]
    return total, unread


def _one_pass(
    db: pw.SqliteDatabase, f: Filter, *, sort_by: str, desc: bool, offset: int, limit: int
) -> tuple[int, int, list[str]]:
    """Counts and page from one scan of the matches (a selective filter: at most ONE_PASS_MAX candidates)."""
    where, params = f.where()
    if f.viewer is None or f.unread_for == f.viewer:
        rows = all_rows(db, f"SELECT m.{SORT_KEYS[sort_by]}, m.message_id, 0 FROM messages m WHERE {where}", params)
    else:
        rows = all_rows(
            db,
            f"SELECT m.{SORT_KEYS[sort_by]}, m.message_id, m.agent_id = ? OR EXISTS (SELECT 1 "
            f"FROM read_state r WHERE r.message_id = m.message_id AND r.agent_id = ? AND r.is_read = 1) "
            f"FROM messages m WHERE {where}",
            [f.viewer, f.viewer] + params,
        )
    rows.sort(reverse=desc)
    total = len(rows)
    unread = total - sum(r[2] for r in rows)
    return total, unread, [r[1] for r in rows[offset : offset + limit]]


def _page_ids(
    db: pw.SqliteDatabase,
    f: Filter,
    *,
    sort_by: str,
    desc: bool,
    offset: int,
    limit: int,
    total: int | None,
    in_sigs: int | None,
) -> list[str]:
    """Message ids of one page, in order."""
    if limit <= 0:
        return []
    direction = "DESC" if desc else "ASC"
    key = SORT_KEYS[sort_by]
    order = f"m.{key} {direction}, m.message_id {direction}"
    where, params = f.where()
    source = "messages m"
    if total is not None and not f.extra and f.author_id is None:
        # Counters known: walk the time index until the page is full (cost ~ rows
        # passed over), or, when the mention sets are rare, start from their mention
        # refs and sort those few messages (cost ~ messages in the sets).
        source = f"messages m INDEXED BY {SORT_INDEXES[sort_by]}"
        if f.sigs is not None and f.targets is not None and in_sigs is not None and total > 0:
            live = scalar(db, "SELECT coalesce(sum(n), 0) FROM sig_totals")
            if in_sigs * 4 < (offset + limit) * live / total:
                values = f.targets + ["@" + t for t in f.targets]
                source = (
                    f"(SELECT DISTINCT message_id FROM message_refs WHERE ref_type = 'mention' AND ref_value IN "
                    f"({qmarks(len(values))})) AS hit CROSS JOIN messages m ON m.message_id = hit.message_id"
                )
                params = values + params
    return [
        r[0]
        for r in all_rows(
            db,
            f"SELECT m.message_id FROM {source} WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
            params + [limit, offset],
        )
    ]


def list_messages(
    db: pw.SqliteDatabase,
    *,
    viewer: str | None = None,
    author_id: str | None = None,
    exclude_author: str | None = None,
    scope: Any = None,
    ref: Any = None,
    mentions_of: str | None = None,
    mention_role: str | None = None,
    unread_for: str | None = None,
    thread_id: str | None = None,
    include_deleted: bool = False,
    include_archived: bool = False,
    archived_only: bool = False,
    page: Any = 1,
    page_size: Any = DEFAULT_PAGE_SIZE,
    sort_by: str = "created_at",
    sort_order: str = "desc",
    _use_counters: bool = True,
) -> dict[str, Any]:
    """spec message.list: ``{messages, total, unread, page, page_size, total_pages}``.

    ``viewer``: whose read state gives ``is_read`` and ``unread`` (the unread count
    among all matching messages) and whose archive marks hide messages (unless
    ``include_archived``); defaults to ``unread_for``. One's own messages are never
    unread to oneself: read for their author in ``is_read``, ``unread`` and
    ``unread_for``. Without a viewer nothing is
    read, so ``unread == total``. ``mentions_of=A``: messages that mention A
    (`mention_targets`); ``mention_role=R``: messages that mention R, ``everyone``
    or a group holding R as a role member (`role_targets`); both together: both
    must hold. ``unread_for=A``: only messages A has not read. Deleted messages
    only with ``include_deleted``; ``archived_only``: only the messages the viewer
    archived.

    Raises:
        ValidationError: bad page, page_size (max 100), sort_by, sort_order, scope or ref.
    """
    page, page_size = paging(page, page_size, sort_by, sort_order)
    viewer = viewer or unread_for or None
    f = build_filter(
        db,
        viewer=viewer,
        author_id=author_id or None,
        exclude_author=exclude_author or None,
        scope=scope,
        ref=ref,
        mentions_of=mentions_of,
        mention_role=mention_role,
        unread_for=unread_for or None,
        thread_id=thread_id,
        include_deleted=include_deleted,
        include_archived=include_archived,
        archived_only=archived_only,
    )
    offset = (page - 1) * page_size
    if f.empty:
        total = unread = 0
        ids = []
    elif _use_counters and f.countable():
        total, unread, in_sigs = _counter_counts(db, f)
        ids = _page_ids(
            db,
            f,
            sort_by=sort_by,
            desc=sort_order == "desc",
            offset=offset,
            limit=min(page_size, total - offset),
            total=total,
            in_sigs=in_sigs,
        )
    elif f.bounds and min(scalar(db, sql, params) for sql, params in f.bounds) <= ONE_PASS_MAX:
        total, unread, ids = _one_pass(
            db, f, sort_by=sort_by, desc=sort_order == "desc", offset=offset, limit=page_size
        )
    else:
        total, unread = _sql_counts(db, f)
        ids = _page_ids(
            db,
            f,
            sort_by=sort_by,
            desc=sort_order == "desc",
            offset=offset,
            limit=min(page_size, total - offset),
            total=None,
            in_sigs=None,
        )
    return {
        "messages": message_items(db, ids, viewer),
        "total": total,
        "unread": unread,
        "page": page,
        "page_size": page_size,
        "total_pages": math.ceil(total / page_size) if total else 0,
    }


# --------------------------------------------------------------------------- inbox views


def counts(db: pw.SqliteDatabase, agent: str, *, mentions_only: bool = False) -> dict[str, Any]:
    """``{"total", "unread"}`` of the agent's inbox: live, un-archived messages by
    others (only those mentioning it with ``mentions_only``)."""
    out = list_messages(
        db, viewer=agent, exclude_author=agent, mentions_of=agent if mentions_only else None, page_size=1, page=1
    )
    return {"total": out["total"], "unread": out["unread"]}


def unread_ids(db: pw.SqliteDatabase, agent: str, *, mentions_only: bool = False, scope: Any = None) -> list[str]:
    """Every message of the agent's inbox it has not read, oldest first (``message read --all``)."""
    f = build_filter(
        db,
        viewer=agent,
        author_id=None,
        exclude_author=agent,
        scope=scope,
        ref=None,
        mentions_of=agent if mentions_only else None,
        mention_role=None,
        unread_for=agent,
        thread_id=None,
        include_deleted=False,
        include_archived=False,
    )
    if f.empty:
        return []
    where, params = f.where()
    return [
        r[0]
        for r in all_rows(
            db, f"SELECT m.message_id FROM messages m WHERE {where} ORDER BY m.created_key, m.message_id", params
        )
    ]


def sent_messages(
    db: pw.SqliteDatabase, agent: str, page: int = 1, page_size: int = DEFAULT_PAGE_SIZE
) -> dict[str, Any]:
    """message.list of the agent's own messages; each item also has ``read_by`` (other agents)."""
    out = list_messages(db, viewer=agent, author_id=agent, page=page, page_size=page_size)
    readers = read_by(db, [m["message_id"] for m in out["messages"]])
    for m in out["messages"]:
        m["read_by"] = [a for a in readers.get(m["message_id"], []) if a != agent]
    return out


def unread_after(db: pw.SqliteDatabase, query: dict[str, Any], after: str) -> list[dict[str, Any]]:
    """`list_messages` (``query`` holds its arguments) limited to messages created after message
    ``after``, oldest first; ``message.wait --after``.

    Walks the inbox newest first and stops at the first message not after ``after``.

    Raises:
        NotFound: there is no message ``after``.
    """
    created = created_at(db, after)
    if created is None:
        raise NotFound(f"message {after} not found (after)")
    cursor = (time_key(created), after)
    newer: list[dict[str, Any]] = []
    page = 1
    while True:
        result = list_messages(db, **{**query, "sort_order": "desc", "page_size": 100, "page": page})
        batch = result["messages"]
        for m in batch:
            if (time_key(m.get("created_at") or ""), m["message_id"]) <= cursor:
                return newer[::-1][: query["page_size"]]
            newer.append(m)
        if not batch or page >= (result.get("total_pages") or 1):
            return newer[::-1][: query["page_size"]]
        page += 1

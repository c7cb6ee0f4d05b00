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
   read or archived (kept by triggers, see models.COUNTER_TRIGGERS). An inbox
   query resolves the agent's targets to the mention sets that contain one of
   them, takes ``total`` and ``unread`` from those counters, and fetches only the
   page: walking the time index newest first (when matches are dense) or starting
   from the mention refs (when they are sparse), stopping as soon as the page is
   full because the exact count is known. Filters the counters cannot answer (scope,
   ref, thread, another author) are counted with SQL instead; the results are
   the same either way (tests compare both paths).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import peewee as pw

from ..errors import NotFound, ValidationError
from ..events import time_key
from ..events.tags import tag_fields
from .directory import EVERYONE, LIVE_GROUP, LIVE_MEMBER, bare_name, get_agent
from .sql import all_rows, chunks, one_row, qmarks, rows_in

MAX_PAGE_SIZE = 100
ONE_PASS_MAX = 50_000  # a filter with at most this many candidates is counted and paged in one scan
DEFAULT_PAGE_SIZE = 10
SORT_KEYS = {"created_at": "created_key", "updated_at": "updated_key"}
SORT_INDEXES = {"created_at": "idx_messages_time", "updated_at": "idx_messages_updated"}
PREVIEW_CHARS = 100
_MESSAGE_COLUMNS = ("message_id, agent_id, session_id, thread_id, body_format, body_content, body_structured, "
                    "priority, created_at, updated_at, deleted, edit_count, deleted_at, delete_reason, "
                    "authored_by, disclosed")


# --------------------------------------------------------------------------- mention resolution

def _role_of(db, agent: str) -> str | None:
    row = one_row(db, "SELECT role FROM agents WHERE agent_id = ?", (agent,))
    return row[0] if row else None


def _groups_holding(db, *, agent: str | None = None, role: str | None = None) -> list[str]:
    """Existing groups that have ``agent`` (as an agent member) or ``role`` (as a role member)."""
    cond, params = [], []
    if agent:
        cond.append("(gm.member_type = 'agent' AND gm.member_value = ?)")
        params.append(agent)
    if role:
        cond.append("(gm.member_type = 'role' AND gm.member_value = ?)")
        params.append(role)
    if not cond:
        return []
    return [r[0] for r in all_rows(
        db, f"SELECT DISTINCT g.name FROM groups g JOIN group_members gm ON gm.group_name = g.name "
            f"WHERE {LIVE_GROUP} AND {LIVE_MEMBER} AND ({' OR '.join(cond)}) ORDER BY g.name", params)]


def mention_targets(db: pw.SqliteDatabase, agent: str) -> list[str]:
    """Mention values that reach ``agent`` now: its name, its role, ``everyone`` and the
    existing groups that hold the agent or its role."""
    agent = bare_name(agent)
    role = _role_of(db, agent)
    targets = {agent, EVERYONE, *_groups_holding(db, agent=agent, role=role)}
    if role:
        targets.add(role)
    return sorted(targets)


def role_targets(db: pw.SqliteDatabase, role: str) -> list[str]:
    """Mention values that reach every agent of ``role``: the role itself, ``everyone``
    and the existing groups that hold the role as a member (not groups that merely
    hold some agent of that role)."""
    role = bare_name(role)
    return sorted({role, EVERYONE, *_groups_holding(db, role=role)})


def _sigs_for(db, targets: list[str]) -> set[int]:
    if not targets:
        return set()
    return {r[0] for r in all_rows(db, f"SELECT DISTINCT sig_id FROM mention_sig_targets WHERE target IN "
                                   f"({qmarks(len(targets))})", targets)}


# --------------------------------------------------------------------------- message.list

def _tag(value, name: str) -> tuple[str, str]:
    parts = tag_fields(value)
    if parts is None:
        raise ValidationError(f"{name} must be an object with string type and value", field=name)
    return parts


def _paging(page, page_size, sort_by, sort_order) -> tuple[int, int]:
    if page_size is None:
        page_size = DEFAULT_PAGE_SIZE
    if page is None:
        page = 1
    if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
        raise ValidationError("page_size must be a positive integer", field="page_size")
    if page_size > MAX_PAGE_SIZE:
        raise ValidationError(f"page_size must be at most {MAX_PAGE_SIZE} (got {page_size})", field="page_size")
    if not isinstance(page, int) or isinstance(page, bool) or page < 1:
        raise ValidationError("page must be an integer of at least 1", field="page")
    if sort_by not in SORT_KEYS:
        raise ValidationError(f"sort_by must be one of {', '.join(SORT_KEYS)} (got {str(sort_by)[:40]!r})",
                              field="sort_by")
    if sort_order not in ("asc", "desc"):
        raise ValidationError(f"sort_order must be asc or desc (got {str(sort_order)[:40]!r})", field="sort_order")
    return page, page_size


@dataclass
class _Filter:
    """A message.list filter turned into SQL, plus what the counters can answer."""

    viewer: str | None
    unread_for: str | None
    hide_archived: bool
    include_deleted: bool
    author_id: str | None = None
    exclude_author: str | None = None
    sigs: set[int] | None = None          # None: no mention filter
    targets: list[str] | None = None      # mention values of the (first) mention filter
    extra: list[str] = field(default_factory=list)  # conditions the counters cannot answer
    extra_params: list = field(default_factory=list)
    bounds: list[tuple[str, list]] = field(default_factory=list)  # SQL counting candidates of an extra filter
    empty: bool = False                   # a filter that matches nothing (e.g. no mention set)

    def where(self) -> tuple[str, list]:
        cond, params = [], []
        if not self.include_deleted:
            cond.append("m.deleted = 0")
        if self.author_id is not None:
            cond.append("m.agent_id = ?")
            params.append(self.author_id)
        if self.exclude_author is not None:
            cond.append("m.agent_id <> ?")
            params.append(self.exclude_author)
        if self.sigs is not None:
            cond.append(f"m.sig_id IN ({','.join(str(int(s)) for s in sorted(self.sigs))})")
        cond.extend(self.extra)
        params.extend(self.extra_params)
        if self.unread_for is not None:
            cond.append("NOT EXISTS (SELECT 1 FROM read_state r WHERE r.message_id = m.message_id "
                        "AND r.agent_id = ? AND r.is_read = 1)")
            params.append(self.unread_for)
        if self.hide_archived:
            cond.append("NOT EXISTS (SELECT 1 FROM archive_marks x WHERE x.message_id = m.message_id "
                        "AND x.agent_id = ?)")
            params.append(self.viewer)
        return (" AND ".join(cond) or "1"), params

    def countable(self) -> bool:
        """Can the counter tables answer total and unread for this filter?"""
        if self.extra or self.include_deleted:
            return False
        if self.unread_for is not None and self.unread_for != self.viewer:
            return False
        if self.author_id is not None and self.exclude_author is not None:
            return False
        if self.viewer is not None:
            for who in (self.author_id, self.exclude_author):
                if who is not None and who != self.viewer:
                    return False
        return True


def _build_filter(db, *, viewer, author_id, exclude_author, scope, ref, mentions_of, mention_role,
                  unread_for, thread_id, include_deleted, include_archived) -> _Filter:
    f = _Filter(viewer=viewer, unread_for=unread_for, include_deleted=bool(include_deleted),
                hide_archived=viewer is not None and not include_archived,
                author_id=author_id, exclude_author=exclude_author)
    if scope is not None:
        t, v = _tag(scope, "scope")
        f.extra.append("m.message_id IN (SELECT message_id FROM message_scopes WHERE scope_type = ? "
                       "AND scope_value = ?)")
        f.extra_params += [t, v]
        f.bounds.append(("SELECT count(*) FROM message_scopes WHERE scope_type = ? AND scope_value = ?", [t, v]))
    if ref is not None:
        t, v = _tag(ref, "ref")
        f.extra.append("m.message_id IN (SELECT message_id FROM message_refs WHERE ref_type = ? AND ref_value = ?)")
        f.extra_params += [t, v]
        f.bounds.append(("SELECT count(*) FROM message_refs WHERE ref_type = ? AND ref_value = ?", [t, v]))
    if thread_id:
        f.extra.append("m.thread_id = ? AND m.thread_id <> ''")  # <> '': lets SQLite use the partial index
        f.extra_params.append(thread_id)
        f.bounds.append(("SELECT count(*) FROM messages WHERE thread_id = ? AND thread_id <> ''", [thread_id]))
    for targets in ([mention_targets(db, mentions_of)] if mentions_of else []) + \
                   ([role_targets(db, mention_role)] if mention_role else []):
        sigs = _sigs_for(db, targets)
        f.sigs = sigs if f.sigs is None else f.sigs & sigs
        f.targets = targets if f.targets is None else f.targets
    if f.sigs is not None and not f.sigs:
        f.empty = True
    return f


def _sig_clause(sigs: set[int] | None) -> str:
    return "" if sigs is None else f" AND sig_id IN ({','.join(str(int(s)) for s in sorted(sigs))})"


def _counter_counts(db, f: _Filter) -> tuple[int, int, int]:
    """(total, unread, live messages in the mention sets) from the counter tables."""
    sig_sql = _sig_clause(f.sigs)
    in_sigs = one_row(db, f"SELECT coalesce(sum(n), 0) FROM sig_totals WHERE 1{sig_sql}")[0]
    total = in_sigs
    if f.author_id is not None:
        total = one_row(db, f"SELECT coalesce(sum(n), 0) FROM sig_author_totals WHERE author = ?{sig_sql}",
                     (f.author_id,))[0]
    elif f.exclude_author is not None:
        total -= one_row(db, f"SELECT coalesce(sum(n), 0) FROM sig_author_totals WHERE author = ?{sig_sql}",
                      (f.exclude_author,))[0]
    if f.viewer is None:
        return total, total, in_sigs
    n_read = n_arch = n_read_arch = 0
    for own, r, a, ra in all_rows(db, f"SELECT own, sum(n_read), sum(n_arch), sum(n_read_arch) FROM agent_sig_counts "
                                  f"WHERE agent_id = ?{sig_sql} GROUP BY own", (f.viewer,)):
        if (own and f.exclude_author is not None) or (not own and f.author_id is not None):
            continue
        n_read, n_arch, n_read_arch = n_read + r, n_arch + a, n_read_arch + ra
    if f.hide_archived:
        total -= n_arch
        n_read -= n_read_arch
    unread = total - n_read
    if f.unread_for is not None:
        total = unread
    return total, unread, in_sigs


def _sql_counts(db, f: _Filter) -> tuple[int, int]:
    where, params = f.where()
    if f.viewer is None or f.unread_for == f.viewer:
        n = one_row(db, f"SELECT count(*) FROM messages m WHERE {where}", params)[0]
        return n, n
    total, unread = one_row(db, f"SELECT count(*), coalesce(sum(NOT EXISTS (SELECT 1 FROM read_state r "
                             f"WHERE r.message_id = m.message_id AND r.agent_id = ? AND r.is_read = 1)), 0) "
                             f"FROM messages m WHERE {where}", [f.viewer] + params)
    return total, unread


def _one_pass(db, f: _Filter, *, sort_by: str, desc: bool, offset: int, limit: int) -> tuple[int, int, list[str]]:
    """Counts and page from one scan of the matches (a selective filter: at most ONE_PASS_MAX candidates)."""
    where, params = f.where()
    if f.viewer is None or f.unread_for == f.viewer:
        rows = all_rows(db, f"SELECT m.{SORT_KEYS[sort_by]}, m.message_id, 0 FROM messages m WHERE {where}", params)
    else:
        rows = all_rows(db, f"SELECT m.{SORT_KEYS[sort_by]}, m.message_id, EXISTS (SELECT 1 FROM read_state r "
                        f"WHERE r.message_id = m.message_id AND r.agent_id = ? AND r.is_read = 1) "
                        f"FROM messages m WHERE {where}", [f.viewer] + params)
    rows.sort(reverse=desc)
    total = len(rows)
    unread = total - sum(r[2] for r in rows)
    return total, unread, [r[1] for r in rows[offset:offset + limit]]


def _page_ids(db, f: _Filter, *, sort_by: str, desc: bool, offset: int, limit: int, total: int | None,
              in_sigs: int | None) -> list[str]:
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
        if f.sigs is not None and total > 0:
            live = one_row(db, "SELECT coalesce(sum(n), 0) FROM sig_totals")[0]
            if in_sigs * 4 < (offset + limit) * live / total:
                values = f.targets + ["@" + t for t in f.targets]
                source = (f"(SELECT DISTINCT message_id FROM message_refs WHERE ref_type = 'mention' AND ref_value IN "
                          f"({qmarks(len(values))})) AS hit CROSS JOIN messages m ON m.message_id = hit.message_id")
                params = values + params
    return [r[0] for r in all_rows(
        db, f"SELECT m.message_id FROM {source} WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
        params + [limit, offset])]


def list_messages(db: pw.SqliteDatabase, *, viewer=None, author_id=None, exclude_author=None, scope=None,
                  ref=None, mentions_of=None, mention_role=None, unread_for=None, thread_id=None,
                  include_deleted=False, include_archived=False, page=1, page_size=DEFAULT_PAGE_SIZE,
                  sort_by="created_at", sort_order="desc", _use_counters: bool = True) -> dict:
    """spec message.list: ``{messages, total, unread, page, page_size, total_pages}``.

    ``viewer``: whose read state gives ``is_read`` and ``unread`` (the unread count
    among all matching messages) and whose archive marks hide messages (unless
    ``include_archived``); defaults to ``unread_for``. Without a viewer nothing is
    read, so ``unread == total``. ``mentions_of=A``: messages that mention A
    (`mention_targets`); ``mention_role=R``: messages that mention R, ``everyone``
    or a group holding R as a role member (`role_targets`); both together: both
    must hold. ``unread_for=A``: only messages A has not read. Deleted messages
    only with ``include_deleted``.

    Raises:
        ValidationError: bad page, page_size (max 100), sort_by, sort_order, scope or ref.
    """
    page, page_size = _paging(page, page_size, sort_by, sort_order)
    viewer = viewer or unread_for or None
    f = _build_filter(db, viewer=viewer, author_id=author_id or None, exclude_author=exclude_author or None,
                      scope=scope, ref=ref, mentions_of=mentions_of, mention_role=mention_role,
                      unread_for=unread_for or None, thread_id=thread_id, include_deleted=include_deleted,
                      include_archived=include_archived)
    offset = (page - 1) * page_size
    if f.empty:
        total = unread = 0
        ids = []
    elif _use_counters and f.countable():
        total, unread, in_sigs = _counter_counts(db, f)
        ids = _page_ids(db, f, sort_by=sort_by, desc=sort_order == "desc", offset=offset,
                        limit=min(page_size, total - offset), total=total, in_sigs=in_sigs)
    elif f.bounds and min(one_row(db, sql, params)[0] for sql, params in f.bounds) <= ONE_PASS_MAX:
        total, unread, ids = _one_pass(db, f, sort_by=sort_by, desc=sort_order == "desc", offset=offset,
                                       limit=page_size)
    else:
        total, unread = _sql_counts(db, f)
        ids = _page_ids(db, f, sort_by=sort_by, desc=sort_order == "desc", offset=offset,
                        limit=min(page_size, total - offset), total=None, in_sigs=None)
    return {
        "messages": _items(db, ids, viewer),
        "total": total,
        "unread": unread,
        "page": page,
        "page_size": page_size,
        "total_pages": math.ceil(total / page_size) if total else 0,
    }


def targets_of(db: pw.SqliteDatabase, name: str) -> list[str]:
    """Names whose mention counts as mentioning ``name`` (an agent, else a role or group), like the inbox."""
    if get_agent(db, name) is not None:
        return list(mention_targets(db, name))
    return list(role_targets(db, name))


# --------------------------------------------------------------------------- facts the RPC layer and the hub check

def message_heads(db: pw.SqliteDatabase, ids: list[str]) -> dict[str, dict]:
    """Author, deleted flag and thread of every existing message among ``ids``
    (what edit, delete, reply and the receipts check before they write)."""
    return {mid: {"agent_id": agent, "deleted": bool(deleted), "thread_id": thread}
            for mid, agent, deleted, thread in rows_in(
                db, "SELECT message_id, agent_id, deleted, thread_id FROM messages WHERE message_id IN ({q})", ids)}


def read_flags(db: pw.SqliteDatabase, agent: str, ids: list[str]) -> dict[str, bool]:
    """``agent``'s read state of the messages among ``ids`` that have one."""
    return {mid: bool(r) for mid, r in rows_in(
        db, "SELECT message_id, is_read FROM read_state WHERE agent_id=? AND message_id IN ({q})", ids, (agent,))}


def archived_ids(db: pw.SqliteDatabase, agent: str, ids: list[str]) -> set[str]:
    """The messages among ``ids`` that ``agent`` archived."""
    return {r[0] for r in rows_in(
        db, "SELECT message_id FROM archive_marks WHERE agent_id=? AND message_id IN ({q})", ids, (agent,))}


def message_routing(db: pw.SqliteDatabase, ids: list[str]) -> dict[str, dict]:
    """Thread, author, scopes and refs of messages: what subscription filters match on."""
    out: dict[str, dict] = {}
    for mid, thread, agent in rows_in(
            db, "SELECT message_id, thread_id, agent_id FROM messages WHERE message_id IN ({q})", ids):
        out[mid] = {"scopes": [], "refs": [], "thread_id": thread, "agent_id": agent}
    for mid, t, v in rows_in(
            db, "SELECT message_id, scope_type, scope_value FROM message_scopes WHERE message_id IN ({q})", ids):
        if mid in out:
            out[mid]["scopes"].append({"type": t, "value": v})
    for mid, t, v in rows_in(
            db, "SELECT message_id, ref_type, ref_value FROM message_refs WHERE message_id IN ({q})", ids):
        if mid in out:
            out[mid]["refs"].append({"type": t, "value": v})
    return out


def created_at(db: pw.SqliteDatabase, message_id: str) -> str | None:
    """When a message was created (as its author wrote it), or None when there is no such message."""
    r = one_row(db, "SELECT created_at FROM messages WHERE message_id=?", (message_id,))
    return r[0] if r else None


# --------------------------------------------------------------------------- message items

def _tags_of(db, table: str, ids: list[str]) -> dict[str, list[dict]]:
    col = "scope" if table == "message_scopes" else "ref"
    out: dict[str, list[dict]] = {}
    for mid, t, v in all_rows(db, f"SELECT message_id, {col}_type, {col}_value FROM {table} WHERE message_id IN "
                              f"({qmarks(len(ids))}) ORDER BY message_id, {col}_type, {col}_value", ids):
        out.setdefault(mid, []).append({"type": t, "value": v})
    return out


def _read_ids(db, ids: list[str], agent: str | None) -> set[str]:
    if not agent or not ids:
        return set()
    return {r[0] for r in all_rows(db, f"SELECT message_id FROM read_state WHERE message_id IN ({qmarks(len(ids))}) "
                                   f"AND agent_id = ? AND is_read = 1", ids + [agent])}


def _rows_by_id(db, ids: list[str]) -> dict[str, tuple]:
    return {r[0]: r for r in all_rows(db, f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE message_id IN "
                                      f"({qmarks(len(ids))})", ids)}


def _items(db, ids: list[str], viewer: str | None) -> list[dict]:
    """message.list items for ``ids`` (in that order)."""
    out = []
    for chunk in chunks(ids, 500):
        rows = _rows_by_id(db, chunk)
        scopes = _tags_of(db, "message_scopes", chunk)
        refs = _tags_of(db, "message_refs", chunk)
        read = _read_ids(db, chunk, viewer)
        for mid in chunk:
            row = rows.get(mid)
            if row is not None:
                out.append(_item(row, scopes.get(mid, []), refs.get(mid, []), mid in read))
    return out


def _item(row: tuple, scopes: list[dict], refs: list[dict], is_read: bool) -> dict:
    (mid, agent, session, thread, fmt, content, structured, priority, created_at, updated_at, deleted,
     edits) = row[:12]
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
    }


def _read_by(db, ids: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for mid, agent in rows_in(db, "SELECT message_id, agent_id FROM read_state WHERE message_id IN ({q}) "
                                  "AND is_read = 1 ORDER BY agent_id", ids):
        out.setdefault(mid, []).append(agent)
    return out


def get_message(db: pw.SqliteDatabase, message_id: str, viewer: str | None = None) -> dict:
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
    item = _item(row, scopes, refs, message_id in _read_ids(db, [message_id], viewer))
    deleted_at, delete_reason, authored_by, disclosed = row[12:16]
    edits = [{"edited_at": at, "edited_by": by, "old_content": old or "", "new_content": new or ""}
             for at, by, old, new in all_rows(db, "SELECT edited_at, edited_by, old_content, new_content "
                                              "FROM message_edits WHERE message_id = ? ORDER BY event_id, id",
                                          (message_id,))]
    message = {
        "message_id": message_id,
        "author": {"agent_id": item["agent_id"], "session_id": item["session_id"]},
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
        "read_by": _read_by(db, [message_id]).get(message_id, []),
    }
    return {"message": message}


# --------------------------------------------------------------------------- threads

def _thread_of(db, thread_or_message_id: str) -> tuple[str, str] | None:
    """("thread", thread_id) or ("replies", root message id) for a thread or message id."""
    if not isinstance(thread_or_message_id, str) or not thread_or_message_id:
        return None
    x = thread_or_message_id
    if one_row(db, "SELECT 1 FROM messages WHERE thread_id = ? AND thread_id <> '' LIMIT 1", (x,)) or \
            one_row(db, "SELECT 1 FROM threads WHERE thread_id = ?", (x,)):
        return ("thread", x)
    row = one_row(db, "SELECT thread_id FROM messages WHERE message_id = ?", (x,))
    if row is None:
        return None
    if row[0]:
        return ("thread", row[0])
    seen = {x}  # climb reply_to refs to the root of the reply tree
    while True:
        parent = one_row(db, "SELECT r.ref_value FROM message_refs r JOIN messages p ON p.message_id = r.ref_value "
                          "WHERE r.message_id = ? AND r.ref_type = 'reply_to' ORDER BY r.ref_value LIMIT 1", (x,))
        if parent is None or parent[0] in seen or len(seen) > 10_000:
            return ("replies", x)
        x = parent[0]
        seen.add(x)


def _thread_ids(db, thread_or_message_id: str, include_deleted: bool) -> list[str]:
    found = _thread_of(db, thread_or_message_id)
    if found is None:
        return []
    live = "" if include_deleted else " AND deleted = 0"
    kind, key = found
    if kind == "thread":
        return [r[0] for r in all_rows(db, f"SELECT message_id FROM messages WHERE thread_id = ? AND thread_id <> ''{live} "
                                       f"ORDER BY created_key, message_id", (key,))]
    ids, frontier = {key}, [key]  # the root, replies to it (transitively), and messages threaded under it
    while frontier and len(ids) < 100_000:
        nxt = [r[0] for r in rows_in(db, "SELECT message_id FROM message_refs WHERE ref_type = 'reply_to' "
                                         "AND ref_value IN ({q})", frontier) if r[0] not in ids]
        nxt += [r[0] for r in all_rows(db, "SELECT message_id FROM messages WHERE thread_id = ? AND thread_id <> ''",
                                   (key,))
                if r[0] not in ids] if frontier == [key] else []
        ids.update(nxt)
        frontier = list(dict.fromkeys(nxt))
    ordered = rows_in(db, "SELECT created_key, message_id FROM messages WHERE message_id IN ({q})" + live, sorted(ids))
    return [mid for _, mid in sorted(ordered)]


def thread_messages(db: pw.SqliteDatabase, thread_or_message_id: str, viewer: str | None = None, *,
                    include_deleted: bool = False) -> list[dict]:
    """Messages of a thread, oldest first, as message.list items.

    Accepts a thread id or the id of any message in it. A message without a
    thread id stands for its reply tree: the root reached through ``reply_to``
    refs and every reply below it. Unknown ids give [].
    """
    return _items(db, _thread_ids(db, thread_or_message_id, include_deleted), viewer)


def thread_summary(db: pw.SqliteDatabase, thread_id: str, viewer: str | None) -> dict | None:
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
        read |= _read_ids(db, list(chunk), viewer)
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


# --------------------------------------------------------------------------- counts, receipts

def counts(db: pw.SqliteDatabase, agent: str, *, mentions_only: bool = False) -> dict:
    """``{"total", "unread"}`` of the agent's inbox: live, un-archived messages by
    others (only those mentioning it with ``mentions_only``)."""
    out = list_messages(db, viewer=agent, exclude_author=agent, mentions_of=agent if mentions_only else None,
                        page_size=1, page=1)
    return {"total": out["total"], "unread": out["unread"]}


def unread_ids(db: pw.SqliteDatabase, agent: str, *, mentions_only: bool = False, scope=None) -> list[str]:
    """Every message of the agent's inbox it has not read, oldest first (``message read --all``)."""
    f = _build_filter(db, viewer=agent, author_id=None, exclude_author=agent, scope=scope, ref=None,
                      mentions_of=agent if mentions_only else None, mention_role=None, unread_for=agent,
                      thread_id=None, include_deleted=False, include_archived=False)
    if f.empty:
        return []
    where, params = f.where()
    return [r[0] for r in all_rows(db, f"SELECT m.message_id FROM messages m WHERE {where} "
                                   f"ORDER BY m.created_key, m.message_id", params)]


def also_read_by(db: pw.SqliteDatabase, message_ids: list[str], agent: str) -> dict[str, list[str]]:
    """For each message, the other agents that currently have it read (messages with none are left out)."""
    ids = list(dict.fromkeys(m for m in message_ids if isinstance(m, str)))
    return {mid: [a for a in agents if a != agent] for mid, agents in _read_by(db, ids).items()
            if any(a != agent for a in agents)}


def sent_messages(db: pw.SqliteDatabase, agent: str, page: int = 1, page_size: int = DEFAULT_PAGE_SIZE) -> dict:
    """message.list of the agent's own messages; each item also has ``read_by`` (other agents)."""
    out = list_messages(db, viewer=agent, author_id=agent, page=page, page_size=page_size)
    read_by = _read_by(db, [m["message_id"] for m in out["messages"]])
    for m in out["messages"]:
        m["read_by"] = [a for a in read_by.get(m["message_id"], []) if a != agent]
    return out


def unread_after(db: pw.SqliteDatabase, query: dict, after: str) -> list[dict]:
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
    newer: list[dict] = []
    page = 1
    while True:
        result = list_messages(db, **{**query, "sort_order": "desc", "page_size": 100, "page": page})
        batch = result["messages"]
        for m in batch:
            if (time_key(m.get("created_at") or ""), m["message_id"]) <= cursor:
                return newer[::-1][:query["page_size"]]
            newer.append(m)
        if not batch or page >= (result.get("total_pages") or 1):
            return newer[::-1][:query["page_size"]]
        page += 1

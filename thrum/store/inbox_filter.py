"""The inbox's filters: message.list's parameters checked and turned into SQL conditions.

A `Filter` holds the conditions of one message.list call and says which of them
the counter tables can answer (`Filter.countable`); the conditions the counters
cannot answer (scope, ref, thread, the viewer's archive) come with the SQL that
counts their candidates (``bounds``), so the planner (`thrum.store.inbox`) can
pick the cheapest way to count and page. `paging` checks page, page_size and
sorting. Nothing here reads a message row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import peewee as pw

from ..errors import ValidationError
from ..events.tags import tag_fields
from .mentions import mention_targets, role_targets, sigs_for

MAX_PAGE_SIZE = 100
DEFAULT_PAGE_SIZE = 10
SORT_KEYS = {"created_at": "created_key", "updated_at": "updated_key"}


def _tag(value: Any, name: str) -> tuple[str, str]:
    parts = tag_fields(value)
    if parts is None:
        raise ValidationError(f"{name} must be an object with string type and value", field=name)
    return parts


def paging(page: Any, page_size: Any, sort_by: Any, sort_order: Any) -> tuple[int, int]:
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
        raise ValidationError(
            f"sort_by must be one of {', '.join(SORT_KEYS)} (got {str(sort_by)[:40]!r})", field="sort_by"
        )
    if sort_order not in ("asc", "desc"):
        raise ValidationError(f"sort_order must be asc or desc (got {str(sort_order)[:40]!r})", field="sort_order")
    return page, page_size


@dataclass
class Filter:
    """A message.list filter turned into SQL, plus what the counters can answer."""

    viewer: str | None
    unread_for: str | None
    hide_archived: bool
    include_deleted: bool
    author_id: str | None = None
    exclude_author: str | None = None
    sigs: set[int] | None = None  # None: no mention filter
    targets: list[str] | None = None  # mention values of the (first) mention filter
    extra: list[str] = field(default_factory=list)  # conditions the counters cannot answer
    extra_params: list[Any] = field(default_factory=list)
    bounds: list[tuple[str, list[Any]]] = field(default_factory=list)  # SQL counting candidates of an extra filter
    empty: bool = False  # a filter that matches nothing (e.g. no mention set)

    def where(self) -> tuple[str, list[Any]]:
        cond: list[str] = []
        params: list[Any] = []
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
        if self.unread_for is not None:  # one's own messages are never unread to oneself
            cond.append(
                "m.agent_id <> ? AND NOT EXISTS (SELECT 1 FROM read_state r WHERE r.message_id = m.message_id "
                "AND r.agent_id = ? AND r.is_read = 1)"
            )
            params += [self.unread_for, self.unread_for]
        if self.hide_archived:
            cond.append(
                "NOT EXISTS (SELECT 1 FROM archive_marks x WHERE x.message_id = m.message_id AND x.agent_id = ?)"
            )
            params.append(self.viewer)
        return (" AND ".join(cond) or "1"), params

    def require(self, condition: tuple[str, list[Any], tuple[str, list[Any]] | None]) -> None:
        """Add a condition the counters cannot answer: (SQL over ``m``, its params, the SQL counting
        its candidates or None), as `scope_condition` and its siblings make them."""
        sql, params, bound = condition
        self.extra.append(sql)
        self.extra_params.extend(params)
        if bound is not None:
            self.bounds.append(bound)

    def require_mentions(self, db: pw.SqliteDatabase, targets: list[str]) -> None:
        """Only messages whose mention set holds one of ``targets`` (with every mention filter before)."""
        sigs = sigs_for(db, targets)
        self.sigs = sigs if self.sigs is None else self.sigs & sigs
        self.targets = targets if self.targets is None else self.targets
        if not self.sigs:
            self.empty = True

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


def build_filter(
    db: pw.SqliteDatabase,
    *,
    viewer: str | None,
    author_id: str | None,
    exclude_author: str | None,
    scope: Any,
    ref: Any,
    mentions_of: str | None,
    mention_role: str | None,
    unread_for: str | None,
    thread_id: str | None,
    include_deleted: bool,
    include_archived: bool,
    archived_only: bool = False,
) -> Filter:
    f = Filter(
        viewer=viewer,
        unread_for=unread_for,
        include_deleted=bool(include_deleted),
        hide_archived=viewer is not None and not include_archived and not archived_only,
        author_id=author_id,
        exclude_author=exclude_author,
    )
    if archived_only:  # the viewer's archive (nothing without a viewer: nobody archived it)
        if viewer is None:
            f.empty = True
        f.require(
            (
                "EXISTS (SELECT 1 FROM archive_marks x WHERE x.message_id = m.message_id AND x.agent_id = ?)",
                [viewer],
                ("SELECT count(*) FROM archive_marks WHERE agent_id = ?", [viewer]),
            )
        )
    if scope is not None:
        f.require(scope_condition(*_tag(scope, "scope")))
    if ref is not None:
        f.require(ref_condition(*_tag(ref, "ref")))
    if thread_id:
        f.require(thread_condition([thread_id]))
    for targets in ([mention_targets(db, mentions_of)] if mentions_of else []) + (
        [role_targets(db, mention_role)] if mention_role else []
    ):
        f.require_mentions(db, targets)
    return f


Condition = tuple[str, list[Any], tuple[str, list[Any]] | None]


def scope_condition(kind: str, value: str, *, per_row: bool = False) -> Condition:
    """Messages with this scope (for `Filter.require`). ``per_row``: the same rule asked of each
    row (a lookup per row) rather than as the set of matching ids (read once, then probed):
    cheaper when something else already found few rows (the search index)."""
    return _tag_condition("message_scopes", "scope", kind, value, per_row)


def ref_condition(kind: str, value: str, *, per_row: bool = False) -> Condition:
    """Messages with this ref (for `Filter.require`); ``per_row`` as for `scope_condition`."""
    return _tag_condition("message_refs", "ref", kind, value, per_row)


def _tag_condition(table: str, col: str, kind: str, value: str, per_row: bool) -> Condition:
    match = f"{col}_type = ? AND {col}_value = ?"
    sql = (
        f"EXISTS (SELECT 1 FROM {table} t WHERE t.message_id = m.message_id AND t.{col}_type = ? AND t.{col}_value = ?)"
        if per_row
        else f"m.message_id IN (SELECT message_id FROM {table} WHERE {match})"
    )
    return (sql, [kind, value], (f"SELECT count(*) FROM {table} WHERE {match}", [kind, value]))


def thread_condition(thread_ids: list[str]) -> Condition:
    """Messages in one of these threads (for `Filter.require`)."""
    q = ",".join("?" * len(thread_ids))
    return (
        f"m.thread_id IN ({q}) AND m.thread_id <> ''",  # <> '': lets SQLite use the partial index
        list(thread_ids),
        (f"SELECT count(*) FROM messages WHERE thread_id IN ({q}) AND thread_id <> ''", list(thread_ids)),
    )


def sig_clause(sigs: set[int] | None) -> str:
    return "" if sigs is None else f" AND sig_id IN ({','.join(str(int(s)) for s in sorted(sigs))})"

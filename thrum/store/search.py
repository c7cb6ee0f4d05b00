"""message.search: a parsed query (`thrum.search_query`) answered from the search index, as the caller's inbox sees it.

Rules:

1. Same view as the inbox: the set searched is exactly what ``message.list``
   covers for the caller, built by the inbox's own filter
   (`thrum.store.inbox_filter.build_filter`: deleted messages out, the caller's
   archived ones out unless ``is:archived`` asks for only those, ``is:unread``
   as the inbox's unread); the query's filters narrow it with the inbox's
   conditions (`scope_condition`, mention sets, ...). The index holds only live
   messages with their current text (`thrum.store.search_index`), so an edited
   message is found by its new words only.
2. Ranking: bm25 over the index's columns (`search_index.WEIGHTS`), times a boost
   for recent messages, ``1 + 7 / (7 + age in days)`` (x2 today, x1.5 a week
   ago, x1.2 a month ago); ties newest first. A query without words lists its
   filters' messages newest first.
3. ``total`` is exact over the whole match, not the page. Without filters
   beyond the inbox's view it is the index's own count (no message row read) less
   the viewer's archived matches; the query's filters are narrowed inside the
   index first (`_narrowing`: ``from:`` by the author's name, ``scope:``/``ref:``
   by their values' words) and then checked row by row with their SQL.
4. Snippets come from FTS5 (its own token boundaries); the markers it inserts
   are random per query and checked against the text, then the text is handed
   out as segments ``{text, hit}``, so no message text can pose as a marker.
5. Nothing here raises an SQLite error for any query: the parser quotes every
   word (`Term.fts`), so the MATCH expression is always well formed.
"""

from __future__ import annotations

import math
import re
import secrets
from typing import Any

import peewee as pw

from ..errors import ValidationError
from ..events.ids import parse_time
from ..search_query import Query
from . import search_index
from .inbox_filter import Filter, build_filter, paging, ref_condition, scope_condition, thread_condition
from .mentions import targets_of
from .messages import message_items
from .search_text import SKIPPED_REF_TYPES
from .sql import all_rows, qmarks, scalar

DEFAULT_PAGE_SIZE = 20
SNIPPET_TOKENS = 24
PLAIN_SNIPPET_CHARS = 160
RECENCY_DAYS = 7.0
_T = search_index.TABLE
_BM25 = f"bm25({_T}, {', '.join(str(w) for w in search_index.WEIGHTS)})"
# bm25 is negative (lower is better); the boost makes recent messages more negative
_RANK = f"{_BM25} * (1.0 + coalesce({RECENCY_DAYS} / ({RECENCY_DAYS} + max(0.0, ? - julianday(m.created_key))), 0.0))"


def _filter(db: pw.SqliteDatabase, q: Query, viewer: str | None, *, per_row: bool) -> Filter:
    """The caller's inbox (rule 1), narrowed by the query's filters (``per_row``: the index
    finds the candidates, the filter checks each; else the filter finds them)."""
    if (q.unread or q.archived) and viewer is None:
        raise ValidationError("invalid query: is:unread and is:archived need a caller", field="query")
    f = build_filter(
        db,
        viewer=viewer,
        author_id=None,
        exclude_author=None,
        scope=None,
        ref=None,
        mentions_of=None,
        mention_role=None,
        unread_for=viewer if q.unread else None,
        thread_id=None,
        include_deleted=False,
        include_archived=False,
        archived_only=q.archived,
    )
    if q.authors:
        f.require(
            (
                f"m.agent_id IN ({qmarks(len(q.authors))})",
                list(q.authors),
                (f"SELECT count(*) FROM messages WHERE agent_id IN ({qmarks(len(q.authors))})", list(q.authors)),
            )
        )
    for name in q.recipients:
        f.require_mentions(db, targets_of(db, name))
    for kind, value in q.scopes:
        f.require(scope_condition(kind, value, per_row=per_row))
    for kind, value in q.refs:
        f.require(ref_condition(kind, value, per_row=per_row))
    if q.threads:
        f.require(thread_condition(list(q.threads)))
    if q.priorities:
        f.require((f"m.priority IN ({qmarks(len(q.priorities))})", list(q.priorities), None))
    if q.after is not None:
        f.require(("m.created_key >= ?", [q.after], None))
    if q.before is not None:
        f.require(("m.created_key < ?", [q.before], None))
    return f


_SAFE_TAG = re.compile(r"[ -~]*[A-Za-z0-9][ -~]*")  # ASCII with a letter or digit: tokenised as we expect


def _narrowing(q: Query) -> str | None:
    """An FTS5 expression every message the filters select matches (a superset, never fewer):
    the author's name in the author column (which starts with it) for ``from:``, a tag
    value's words for ``scope:`` and ``ref:``. The index intersects it with the words in
    a few milliseconds; the filters' own SQL conditions still decide (rule 1), so a value
    the index splits otherwise only narrows less."""
    parts = []
    if q.authors and all(_SAFE_TAG.fullmatch(a) and '"' not in a for a in q.authors):
        parts.append("author : (" + " OR ".join(f'"{a}"' for a in q.authors) + ")")
    for kind, value in [*q.scopes, *q.refs]:
        if kind not in SKIPPED_REF_TYPES and _SAFE_TAG.fullmatch(value) and '"' not in value:
            parts.append(f'tags : "{value}"')
    return " AND ".join(parts) or None


def _only_visibility(f: Filter) -> bool:
    """Whether the filter holds nothing but the inbox's view (live, not archived by the viewer)."""
    return not f.extra and f.sigs is None and f.unread_for is None and f.author_id is None and not f.include_deleted


def _count(db: pw.SqliteDatabase, match: str, f: Filter, source: str, where: str, params: list[Any]) -> int:
    """How many messages the FTS expression matches in the filter's set.

    The index holds exactly the live messages (search_index rule 1), so without
    other conditions this is the index's own count (no row is read) less the
    viewer's archived messages that match; otherwise each match is checked.
    """
    if not _only_visibility(f):
        return int(scalar(db, f"SELECT count(*) FROM {source} WHERE {_T} MATCH ? AND {where}", [match, *params]))
    total = int(scalar(db, f"SELECT count(*) FROM {_T} WHERE {_T} MATCH ?", [match]))
    if f.hide_archived and total:
        total -= int(
            scalar(
                db,
                f"SELECT count(*) FROM {_T} WHERE {_T} MATCH ? AND rowid IN (SELECT m.rowid FROM archive_marks x "
                f"JOIN messages m ON m.message_id = x.message_id WHERE x.agent_id = ? AND m.deleted = 0)",
                [match, f.viewer],
            )
        )
    return total


def search_messages(
    db: pw.SqliteDatabase,
    query: Query,
    *,
    viewer: str | None,
    now: str,
    page: Any = 1,
    page_size: Any = DEFAULT_PAGE_SIZE,
) -> dict[str, Any]:
    """``{messages, total, page, page_size, total_pages}``; each message as message.list shows it
    plus ``snippet`` and ``subject_snippet`` (segments ``{text, hit}``) and ``score``.

    ``now``: RFC 3339, the moment recency counts from (the boost of rule 2).

    Raises:
        ValidationError: bad page or page_size (max 100); is:unread/is:archived without a viewer.
    """
    page, page_size = paging(page, page_size, "created_at", "desc")
    offset = (page - 1) * page_size
    ranked = bool(query.wanted)
    match = query.match_expression(lead=_narrowing(query))
    f = _filter(db, query, viewer, per_row=match is not None)
    scores: dict[str, float] = {}
    rowids: dict[str, int] = {}
    total = 0
    if f.empty:
        pass
    elif match is not None:  # the index finds the candidates; the filter's SQL checks each
        where, params = f.where()
        source = f"{_T} CROSS JOIN messages m ON m.rowid = {_T}.rowid"
        total = _count(db, match, f, source, where, params)
        newest = "m.created_key DESC, m.message_id DESC"
        score, score_params = (_RANK, [_julian(now)]) if ranked else ("0.0", [])
        for mid, rowid, rank in all_rows(
            db,
            f"SELECT m.message_id, m.rowid, {score} AS score FROM {source} WHERE {_T} MATCH ? AND {where} "
            f"ORDER BY {'score, ' if ranked else ''}{newest} LIMIT ? OFFSET ?",
            [*score_params, match, *params, page_size, offset],
        ):
            scores[mid] = round(-rank, 6) if ranked else 0.0
            rowids[mid] = rowid
    else:  # filters the index cannot narrow: the filter's SQL alone, newest first
        where, params = f.where()
        excluded = query.exclusion_expression()
        if excluded is not None:
            where += f" AND m.rowid NOT IN (SELECT rowid FROM {_T} WHERE {_T} MATCH ?)"
            params = [*params, excluded]
        total = int(scalar(db, f"SELECT count(*) FROM messages m WHERE {where}", params))
        for (mid,) in all_rows(
            db,
            f"SELECT m.message_id FROM messages m WHERE {where} "
            f"ORDER BY m.created_key DESC, m.message_id DESC LIMIT ? OFFSET ?",
            [*params, page_size, offset],
        ):
            scores[mid] = 0.0
    items = message_items(db, list(scores), viewer) if scores else []
    for item in items:
        item["score"] = scores[item["message_id"]]
    _add_snippets(db, items, query.match_expression() if ranked else None, rowids)
    return {
        "messages": items,
        "total": total,
        "page": page,
        "page_size": page_size,
        "total_pages": math.ceil(total / page_size) if total else 0,
    }


def _julian(now: str) -> float:
    """``now`` as a Julian day number (SQLite's), for the recency boost."""
    return parse_time(now).timestamp() / 86400.0 + 2440587.5


# --------------------------------------------------------------------------- snippets


def _markers(texts: list[str]) -> tuple[str, str]:
    """Two strings found in none of ``texts``: where FTS5 opens and closes a hit."""
    while True:
        nonce = secrets.token_hex(6)
        start, end = f"\ue000{nonce}\ue001", f"\ue002{nonce}\ue003"
        if not any(start in t or end in t for t in texts):
            return start, end


def segments(marked: str, start: str, end: str) -> list[dict[str, Any]]:
    """Text with hit markers → ``[{text, hit}]``, plain and hit runs in order (empty runs left out)."""
    out: list[dict[str, Any]] = []
    rest = marked
    while rest:
        i = rest.find(start)
        if i < 0:
            out.append({"text": rest, "hit": False})
            break
        j = rest.find(end, i + len(start))
        if j < 0:  # cannot happen with FTS5's output; keep the text, drop the marker
            out.append({"text": rest[:i] + rest[i + len(start) :], "hit": False})
            break
        if i:
            out.append({"text": rest[:i], "hit": False})
        if j > i + len(start):
            out.append({"text": rest[i + len(start) : j], "hit": True})
        rest = rest[j + len(end) :]
    return out


def plain_snippet(text: str) -> list[dict[str, Any]]:
    """The start of a text, cut at a word, as one plain segment (a search without words)."""
    text = " ".join(text.split())
    if len(text) > PLAIN_SNIPPET_CHARS:
        cut = text.rfind(" ", 0, PLAIN_SNIPPET_CHARS)
        text = text[: cut if cut > 0 else PLAIN_SNIPPET_CHARS] + " …"
    return [{"text": text, "hit": False}] if text else []


def _add_snippets(
    db: pw.SqliteDatabase, items: list[dict[str, Any]], match: str | None, rowids: dict[str, int]
) -> None:
    if match is None:
        for item in items:
            item["snippet"] = plain_snippet(item["body"]["content"])
            item["subject_snippet"] = [{"text": item["subject"], "hit": False}] if item["subject"] else []
        return
    start, end = _markers([t for item in items for t in (item["body"]["content"], item["subject"])])
    for item in items:
        row = all_rows(
            db,
            f"SELECT snippet({_T}, 0, ?, ?, '…', ?), highlight({_T}, 1, ?, ?) FROM {_T} "
            f"WHERE {_T} MATCH ? AND rowid = ?",
            [start, end, SNIPPET_TOKENS, start, end, match, rowids[item["message_id"]]],
        )
        body, subject = row[0] if row else (item["body"]["content"], item["subject"])
        item["snippet"] = segments(body or "", start, end)
        item["subject_snippet"] = segments(subject or "", start, end)

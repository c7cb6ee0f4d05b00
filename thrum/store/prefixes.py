"""Unique id prefixes: ``msg_01M8AKM2`` names the one message whose id starts so.

Rules (like git's short hashes):

1. An id that exists as typed is itself, whatever it looks like; only an id that
   does not exist is read as a prefix.
2. A prefix needs at least `MIN_PREFIX` characters after its kind's head
   (``msg_``, ``thr_``, ``ses_``); the head may be left out, and the ULID part is
   matched as typed, then upper-cased (ULIDs are upper case).
3. A prefix that starts exactly one id names it; none is `NotFound`; several is a
   `ValidationError` naming the field and listing the candidates (at most
   `MAX_CANDIDATES`, in id order, which for ULIDs is creation order).

Lookups are range scans on the id's index (``id >= prefix AND id < prefix + '~'``),
so a prefix costs one index probe whatever the size of the table.
"""

from __future__ import annotations

from dataclasses import dataclass

import peewee as pw

from ..errors import NotFound, ValidationError
from .sql import all_rows, rows_in

MIN_PREFIX = 4
MAX_CANDIDATES = 10
_ABOVE = "~"  # sorts after every character an id may hold ([0-9A-Za-z_-])


@dataclass(frozen=True)
class _Kind:
    noun: str
    head: str
    table: str
    column: str
    where: str = ""


KINDS = {
    "message": _Kind("message", "msg_", "messages", "message_id"),
    "thread": _Kind("thread", "thr_", "messages", "thread_id", " AND thread_id <> ''"),
    "session": _Kind("session", "ses_", "sessions", "session_id"),
}


def _starting(db: pw.SqliteDatabase, kind: _Kind, prefix: str) -> list[str]:
    rows = all_rows(
        db,
        f"SELECT DISTINCT {kind.column} FROM {kind.table} WHERE {kind.column} >= ? "
        f"AND {kind.column} < ?{kind.where} ORDER BY {kind.column} LIMIT ?",
        (prefix, prefix + _ABOVE, MAX_CANDIDATES + 1),
    )
    return [r[0] for r in rows]


def _complete(db: pw.SqliteDatabase, kind: _Kind, value: str, field: str) -> str | None:
    """The one id ``value`` starts, None when it starts none (or is too short to try)."""
    prefix = value if value.startswith(kind.head) else kind.head + value
    body = prefix[len(kind.head) :]
    if len(body) < MIN_PREFIX:
        return None
    found = _starting(db, kind, prefix)
    if not found and body.upper() != body:
        found = _starting(db, kind, kind.head + body.upper())
    if len(found) <= 1:
        return found[0] if found else None
    shown = found[:MAX_CANDIDATES]
    more = ", …" if len(found) > MAX_CANDIDATES else ""
    raise ValidationError(
        f"invalid params: {field} {value[:80]!r} is ambiguous: it starts {len(shown)}{'+' if more else ''} "
        f"{kind.noun} ids ({', '.join(shown)}{more}); give more characters",
        data={"field": field, "candidates": shown},
    )


def complete_ids(db: pw.SqliteDatabase, kind: str, values: list[str], *, field: str) -> list[str]:
    """The full id each of ``values`` names, in order (rules in the module docstring).

    Raises:
        NotFound: values that name no id, exact or as a prefix (``data.missing``).
        ValidationError: a prefix starts several ids (``data.candidates``).
    """
    k = KINDS[kind]
    exact = {
        r[0]
        for r in rows_in(
            db, f"SELECT {k.column} FROM {k.table} WHERE {k.column} IN ({{q}})", list(dict.fromkeys(values))
        )
    }
    out, missing = [], []
    for v in values:
        full = v if v in exact else _complete(db, k, v, field)
        if full is None:
            missing.append(v)
        else:
            out.append(full)
    if missing:
        short = [m for m in missing if len(m) < len(k.head) + MIN_PREFIX]
        hint = f" (a shortened id needs at least {MIN_PREFIX} characters after {k.head})" if short else ""
        noun = k.noun if len(missing) == 1 else k.noun + "s"
        shown = ", ".join(m[:80] for m in missing[:10]) + (", …" if len(missing) > 10 else "")
        raise NotFound(
            f"{noun} not found: {shown}{hint}" if len(missing) > 1 else f"{noun} {shown} not found{hint}",
            data={"missing": missing[:100]},
        )
    return out


def complete_id(db: pw.SqliteDatabase, kind: str, value: str, *, field: str) -> str:
    """`complete_ids` for one value."""
    return complete_ids(db, kind, [value], field=field)[0]

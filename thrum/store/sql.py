"""The small helpers every SQL function in `thrum.store` uses: rows, placeholders, chunked IN lists.

SQL lives only in `thrum.store` (the daemon, the sync and the front ends call
functions, never write SQL). Queries take the peewee ``SqliteDatabase`` first;
the fold works on a raw `sqlite3` connection, which `qmarks` and `chunks` serve
as well.

SQLite allows 999 host parameters in one statement in the oldest builds we meet,
so a list of ids is sent in chunks of `CHUNK` (`rows_in`).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any, Iterator, Sequence, TypeVar

import peewee as pw

CHUNK = 900  # ids per IN list: below SQLite's smallest host-parameter limit, with room for a few more

T = TypeVar("T")
Row = tuple[Any, ...]


def all_rows(db: pw.Database, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """Every row of one statement."""
    found: list[Row] = db.execute_sql(sql, params).fetchall()
    return found


def one_row(db: pw.Database, sql: str, params: Sequence[Any] = ()) -> Row | None:
    """The first row of one statement, or None."""
    found: Row | None = db.execute_sql(sql, params).fetchone()
    return found


def scalar(db: pw.Database, sql: str, params: Sequence[Any] = ()) -> Any:
    """The one value of a statement that always returns one row (``count``, ``sum``, ``max``)."""
    return db.execute_sql(sql, params).fetchone()[0]


def run(db: pw.Database, sql: str, params: Sequence[Any] = ()) -> int:
    """Execute one writing statement; returns the number of rows it changed."""
    changed: int = db.execute_sql(sql, params).rowcount
    return changed


def qmarks(n: int) -> str:
    """``?,?,?`` for an IN list of ``n`` values."""
    return ",".join("?" * n)


def chunks(seq: Sequence[T], n: int = CHUNK) -> Iterator[Sequence[T]]:
    """``seq`` in slices of at most ``n`` (for IN lists)."""
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def rows_in(db: pw.Database, sql: str, ids: Sequence[Any], before: Sequence[Any] = ()) -> list[Row]:
    """Rows of ``sql`` for every id, sent in chunks: ``{q}`` in ``sql`` is the IN list's placeholders.

    ``before`` are the parameters that come before the IN list in ``sql``.
    """
    out: list[Row] = []
    for chunk in chunks(ids):
        out.extend(db.execute_sql(sql.format(q=qmarks(len(chunk))), [*before, *chunk]).fetchall())
    return out


def _json_each_works() -> bool:
    try:
        with closing(sqlite3.connect(":memory:")) as conn:
            conn.execute("SELECT value FROM json_each('[1]')").fetchall()
    except sqlite3.Error:
        return False
    return True


# Whether this process's SQLite has its JSON functions (built in from 3.38; most builds
# before had them too): a fold may then hand a list of values over as one JSON array.
JSON_EACH = _json_each_works()

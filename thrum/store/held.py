"""Lines held back because they are dated ahead of this replica's clock (docs/design/trust.md, "Time").

The verifier says which lines are *future* (`thrum.trust.verify`); they are kept
here, in the projection's own table ``held_lines``, with the time they carry, and
folded like lines just read once that time is within the allowed skew
(`thrum.store.verified`). Like every table it is derived from the log: a rebuild
holds the same lines again. Bounded by bytes (`MAX_HELD_BYTES`): a line over the
bound is only recorded as quarantined, and is applied by a rebuild after its time.
"""

from __future__ import annotations

import sqlite3

import peewee as pw

from .sql import all_rows, one_row

__all__ = ["MAX_HELD_BYTES", "HeldRow", "due", "held_bytes", "hold", "next_due", "release"]

MAX_HELD_BYTES = 16 * 1024 * 1024

HeldRow = tuple[str, str, str, int, bytes]  # (key, shard, event_id, due_ms, line) of ``held_lines``


def hold(conn: sqlite3.Connection, rows: list[HeldRow]) -> None:
    """Keep ``(key, shard, event_id, due_ms, line)`` rows (a repeated key is kept once)."""
    conn.executemany("INSERT OR IGNORE INTO held_lines(key, shard, event_id, due, line) VALUES (?,?,?,?,?)", rows)


def release(conn: sqlite3.Connection, keys: list[str]) -> None:
    conn.executemany("DELETE FROM held_lines WHERE key = ?", [(k,) for k in keys])


def due(db: pw.SqliteDatabase, horizon_ms: int, limit: int = 2000) -> list[tuple[str, str, bytes]]:
    """``(key, shard, line)`` of held lines whose time is at or before ``horizon_ms``, oldest first."""
    return [
        (key, shard, bytes(line))
        for key, shard, line in all_rows(
            db, "SELECT key, shard, line FROM held_lines WHERE due <= ? ORDER BY due LIMIT ?", (horizon_ms, limit)
        )
    ]


def next_due(db: pw.SqliteDatabase) -> int | None:
    """The earliest time (ms) a held line carries; None when nothing is held."""
    row = one_row(db, "SELECT min(due) FROM held_lines")
    return row[0] if row else None


def held_bytes(db: pw.SqliteDatabase) -> int:
    row = one_row(db, "SELECT coalesce(sum(length(line)), 0) FROM held_lines")
    return int(row[0]) if row else 0

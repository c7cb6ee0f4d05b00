"""``fold_issues``: what the fold refused, one row per line up to a bound, then counted.

A remote can push millions of lines that are refused (junk, forgeries, lines of
unknown signers); a ~290-byte row for each made the database grow with them (issue
31, finding 9). So each kind keeps at most `ROWS_PER_KIND` rows of single lines
(their reasons shown by `sync status` and the UI, and each findable by its key:
the coverage check and the lines that wait for a signer or for their time use
them); past that, refused lines of that kind are counted in one row per file
(key ``kind:shard:*``, ``count``). A file read again from its start (its stored
position no longer matches, or an offline sync merged into it) has its counted rows
dropped first (`recount`), in the transaction that judges its lines again, so each
line is counted once.
"""

from __future__ import annotations

import sqlite3

__all__ = ["ROWS_PER_KIND", "Recorder", "recount", "resolve"]

ROWS_PER_KIND = 10_000


class Recorder:
    """Records refused lines within one fold transaction (``conn``)."""

    def __init__(self, conn: sqlite3.Connection, now: str):
        self.c = conn
        self.now = now
        self._rows: dict[str, int] = {}  # kind -> rows of single lines (read once per fold)

    def record(self, kind: str, shard: str, event_id: str, reason: str) -> bool:
        """Record one refused line/event; True when it was not recorded before (as far as
        rows of single lines tell: past the bound it is counted, and True)."""
        key = f"{kind}:{shard}:{event_id}"
        rows = self._rows.get(kind)
        if rows is None:
            rows = self._rows[kind] = self.c.execute(
                "SELECT count(*) FROM fold_issues WHERE kind = ? AND count IS NULL", (kind,)
            ).fetchone()[0]
        if rows < ROWS_PER_KIND:
            cur = self.c.execute(
                "INSERT OR IGNORE INTO fold_issues(key, kind, shard, event_id, reason, seen_at) VALUES (?,?,?,?,?,?)",
                (key, kind, shard, event_id, reason[:500], self.now),
            )
            self._rows[kind] = rows + cur.rowcount
            return cur.rowcount == 1
        if self.c.execute("SELECT 1 FROM fold_issues WHERE key = ?", (key,)).fetchone() is not None:
            return False
        self.c.execute(
            "INSERT INTO fold_issues(key, kind, shard, event_id, reason, seen_at, count) VALUES (?,?,?,?,?,?,1) "
            "ON CONFLICT(key) DO UPDATE SET count = count + 1, event_id = excluded.event_id, "
            "reason = excluded.reason, seen_at = excluded.seen_at",
            (f"{kind}:{shard}:*", kind, shard, event_id, reason[:500], self.now),
        )
        return True


def resolve(conn: sqlite3.Connection, keys: list[str]) -> None:
    """Issues that no longer hold (a line judged again): its row, or one of its file's count."""
    for key in keys:
        if conn.execute("DELETE FROM fold_issues WHERE key = ?", (key,)).rowcount == 0:
            prefix = key.rsplit(":", 1)[0]
            conn.execute("UPDATE fold_issues SET count = count - 1 WHERE key = ? AND count > 0", (prefix + ":*",))


def recount(conn: sqlite3.Connection, shards: list[str]) -> None:
    """Files about to be judged again from their start: their counted rows go (their
    rows of single lines stay: a line recorded there is not recorded twice)."""
    for shard in shards:
        conn.execute("DELETE FROM fold_issues WHERE shard = ? AND count IS NOT NULL", (shard,))

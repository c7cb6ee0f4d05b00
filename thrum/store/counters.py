"""The counter tables the inbox reads its totals from, and the triggers that keep them.

``sig_totals``, ``sig_author_totals`` and ``agent_sig_counts`` are sums over
messages, read state and archive marks per mention set. The triggers
(`COUNTER_TRIGGERS`) keep them equal to those sums on every insert, update and
delete, so no code path can forget them. A rebuild loads without the triggers
and computes the sums once (`compute_counter_tables`); `verify_counters`
compares what the triggers kept with the sums computed from scratch
(`COUNTER_QUERIES`), for tests and checks.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import peewee as pw

from .sql import all_rows

_ASC_UPSERT = (
    " ON CONFLICT(agent_id, sig_id, own) DO UPDATE SET n_read = n_read + excluded.n_read,"
    " n_arch = n_arch + excluded.n_arch, n_read_arch = n_read_arch + excluded.n_read_arch;"
)


def _message_contribution(row: str, sign: str) -> str:
    """SQL adding (sign '+') or removing ('-') one messages row's share of the counters."""
    live = f"{row}.deleted = 0"
    return (
        f"INSERT INTO sig_totals(sig_id, n) SELECT {row}.sig_id, {sign}1 WHERE {live}"
        f" ON CONFLICT(sig_id) DO UPDATE SET n = n + excluded.n;"
        f" INSERT INTO sig_author_totals(author, sig_id, n) SELECT {row}.agent_id, {row}.sig_id, {sign}1"
        f" WHERE {live} ON CONFLICT(author, sig_id) DO UPDATE SET n = n + excluded.n;"
        f" INSERT INTO agent_sig_counts(agent_id, sig_id, own, n_read, n_arch, n_read_arch)"
        f" SELECT x.agent_id, {row}.sig_id, x.agent_id = {row}.agent_id, {sign}max(x.r), {sign}max(x.a),"
        f" {sign}(max(x.r) * max(x.a)) FROM ("
        f"SELECT agent_id, 1 AS r, 0 AS a FROM read_state WHERE message_id = {row}.message_id AND is_read = 1"
        f" UNION ALL SELECT agent_id, 0, 1 FROM archive_marks WHERE message_id = {row}.message_id) AS x"
        f" WHERE {live} GROUP BY x.agent_id" + _ASC_UPSERT
    )


def _read_delta(row: str, delta: str) -> str:
    return (
        "INSERT INTO agent_sig_counts(agent_id, sig_id, own, n_read, n_arch, n_read_arch)"
        f" SELECT {row}.agent_id, m.sig_id, m.agent_id = {row}.agent_id, {delta}, 0,"
        f" ({delta}) * EXISTS(SELECT 1 FROM archive_marks a WHERE a.agent_id = {row}.agent_id"
        f" AND a.message_id = {row}.message_id)"
        f" FROM messages m WHERE m.message_id = {row}.message_id AND m.deleted = 0" + _ASC_UPSERT
    )


def _archive_delta(row: str, delta: str) -> str:
    return (
        "INSERT INTO agent_sig_counts(agent_id, sig_id, own, n_read, n_arch, n_read_arch)"
        f" SELECT {row}.agent_id, m.sig_id, m.agent_id = {row}.agent_id, 0, {delta},"
        f" ({delta}) * EXISTS(SELECT 1 FROM read_state r WHERE r.agent_id = {row}.agent_id"
        f" AND r.message_id = {row}.message_id AND r.is_read = 1)"
        f" FROM messages m WHERE m.message_id = {row}.message_id AND m.deleted = 0" + _ASC_UPSERT
    )


COUNTER_TRIGGERS = [
    "CREATE TRIGGER IF NOT EXISTS trg_messages_ins AFTER INSERT ON messages BEGIN "
    + _message_contribution("NEW", "+")
    + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_messages_del AFTER DELETE ON messages BEGIN "
    + _message_contribution("OLD", "-")
    + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_messages_upd AFTER UPDATE OF deleted, sig_id, agent_id ON messages "
    "WHEN OLD.deleted IS NOT NEW.deleted OR OLD.sig_id IS NOT NEW.sig_id OR OLD.agent_id IS NOT NEW.agent_id "
    "BEGIN " + _message_contribution("OLD", "-") + " " + _message_contribution("NEW", "+") + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_read_state_ins AFTER INSERT ON read_state WHEN NEW.is_read = 1 BEGIN "
    + _read_delta("NEW", "1")
    + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_read_state_upd AFTER UPDATE OF is_read ON read_state "
    "WHEN OLD.is_read IS NOT NEW.is_read BEGIN " + _read_delta("NEW", "NEW.is_read - OLD.is_read") + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_read_state_del AFTER DELETE ON read_state WHEN OLD.is_read = 1 BEGIN "
    + _read_delta("OLD", "-1")
    + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_archive_ins AFTER INSERT ON archive_marks BEGIN "
    + _archive_delta("NEW", "1")
    + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_archive_del AFTER DELETE ON archive_marks BEGIN "
    + _archive_delta("OLD", "-1")
    + " END",
]

# The counters' share of the messages above a rowid, set-wise. Each reads only those rows
# (rowid range first, then lookups by message id): without NOT INDEXED, SQLite scanned the
# whole idx_messages_agent for its GROUP BY order (87 ms of a 10,000-message fold on a
# 1,000,000-message projection, against 5 ms), and it would scan read_state whole.
BULK_COUNTER_SQL = (
    "INSERT INTO sig_totals(sig_id, n) SELECT sig_id, count(*) FROM messages NOT INDEXED"
    " WHERE rowid > ? AND deleted = 0 GROUP BY sig_id"
    " ON CONFLICT(sig_id) DO UPDATE SET n = n + excluded.n",
    "INSERT INTO sig_author_totals(author, sig_id, n) SELECT agent_id, sig_id, count(*)"
    " FROM messages NOT INDEXED WHERE rowid > ? AND deleted = 0 GROUP BY agent_id, sig_id"
    " ON CONFLICT(author, sig_id) DO UPDATE SET n = n + excluded.n",
    "INSERT INTO agent_sig_counts(agent_id, sig_id, own, n_read, n_arch, n_read_arch)"
    " SELECT x.agent_id, m.sig_id, x.agent_id = m.agent_id, sum(x.r), sum(x.a), sum(x.r * x.a) FROM ("
    "SELECT agent_id, message_id, max(r) AS r, max(a) AS a FROM ("
    "SELECT r.agent_id, r.message_id, 1 AS r, 0 AS a FROM messages n NOT INDEXED"
    " CROSS JOIN read_state r ON r.message_id = n.message_id WHERE n.rowid > ? AND r.is_read = 1"
    " UNION ALL SELECT a.agent_id, a.message_id, 0, 1 FROM messages n NOT INDEXED"
    " CROSS JOIN archive_marks a ON a.message_id = n.message_id WHERE n.rowid > ?)"
    " GROUP BY agent_id, message_id) AS x"
    " JOIN messages m ON m.message_id = x.message_id WHERE m.deleted = 0"
    " GROUP BY x.agent_id, m.sig_id, x.agent_id = m.agent_id" + _ASC_UPSERT.rstrip(";"),
)
BULK_INSERT_ROWS = 200  # new messages in one statement from which `bulk_message_insert` pays off


@contextmanager
def bulk_message_insert(conn: sqlite3.Connection, after_rowid: int) -> Iterator[None]:
    """Insert many messages without the per-row insert trigger, then add their share
    of the counters set-wise (rows with a rowid above ``after_rowid``).

    A trigger firing costs more than the row it follows (measured: 10,000 received
    messages folded in 0.27 s without it, 0.75 s with it), and a sync can bring tens
    of thousands. The trigger is dropped and created again inside the caller's
    transaction, so a failure rolls both back and no other connection ever sees the
    table without it. Use only around plain inserts into ``messages``. Without the
    trigger (a rebuild, which computes every counter once at the end) it does nothing.
    """
    if (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'trg_messages_ins'").fetchone()
        is None
    ):
        yield
        return
    conn.execute("DROP TRIGGER trg_messages_ins")
    try:
        yield
        for sql in BULK_COUNTER_SQL:
            conn.execute(sql, (after_rowid,) * sql.count("?"))
    finally:
        conn.execute(COUNTER_TRIGGERS[0])


# The same sums computed from scratch (`verify_counters`; `compute_counter_tables` computes them in Python).
COUNTER_QUERIES = {
    "sig_totals": "SELECT sig_id, count(*) FROM messages WHERE deleted = 0 GROUP BY sig_id",
    "sig_author_totals": "SELECT agent_id, sig_id, count(*) FROM messages WHERE deleted = 0 GROUP BY agent_id, sig_id",
    "agent_sig_counts": (
        "SELECT x.agent_id, m.sig_id, x.agent_id = m.agent_id AS own, sum(x.r), sum(x.a), sum(x.r * x.a) FROM ("
        "SELECT agent_id, message_id, max(r) AS r, max(a) AS a FROM ("
        "SELECT agent_id, message_id, 1 AS r, 0 AS a FROM read_state WHERE is_read = 1"
        " UNION ALL SELECT agent_id, message_id, 0, 1 FROM archive_marks) GROUP BY agent_id, message_id) AS x"
        " JOIN messages m ON m.message_id = x.message_id WHERE m.deleted = 0"
        " GROUP BY x.agent_id, m.sig_id, own"
    ),
}


def compute_counter_tables(db: pw.SqliteDatabase) -> None:
    """Fill the counter tables from scratch (same sums as COUNTER_QUERIES).

    Aggregates in Python: SQLite's GROUP BY sorts every row first, which over
    millions of read marks costs more than a dict (measured again at 200,000 messages and
    391,440 read marks, CPU of the read marks' step: GROUP BY 0.54-0.65 s, its upsert into
    a keyed table 0.47-0.53 s, the join and a `Counter` 0.49-0.51 s, of which the join alone
    0.20 s: docs/design/decisions.md, "Rebuilds on a large history"). Each row is fetched
    with the GIL released around SQLite's step, so a search index built on another thread
    meanwhile (`search_beside`) is not held up by it.
    """
    conn = db.connection()
    for table in COUNTER_QUERIES:
        conn.execute(f"DELETE FROM {table}")
    by_author = Counter(conn.execute("SELECT agent_id, sig_id FROM messages WHERE deleted = 0"))
    conn.executemany(
        "INSERT INTO sig_author_totals(author, sig_id, n) VALUES (?,?,?)",
        [(a, s, n) for (a, s), n in by_author.items()],
    )
    by_sig: Counter[int] = Counter()
    for (_, s), n in by_author.items():
        by_sig[s] += n
    conn.executemany("INSERT INTO sig_totals(sig_id, n) VALUES (?,?)", list(by_sig.items()))
    reads = Counter(
        conn.execute(
            "SELECT r.agent_id, m.sig_id, r.agent_id = m.agent_id FROM read_state r "
            "JOIN messages m ON m.message_id = r.message_id WHERE r.is_read = 1 AND m.deleted = 0"
        )
    )
    archived: Counter[tuple[str, int, int]] = Counter()
    archived_read: Counter[tuple[str, int, int]] = Counter()
    for agent, sig, own, is_read in conn.execute(
        "SELECT x.agent_id, m.sig_id, x.agent_id = m.agent_id, EXISTS (SELECT 1 FROM read_state r "
        "WHERE r.message_id = x.message_id AND r.agent_id = x.agent_id AND r.is_read = 1) "
        "FROM archive_marks x JOIN messages m ON m.message_id = x.message_id WHERE m.deleted = 0"
    ):
        archived[(agent, sig, own)] += 1
        archived_read[(agent, sig, own)] += is_read
    conn.executemany(
        "INSERT INTO agent_sig_counts(agent_id, sig_id, own, n_read, n_arch, n_read_arch) VALUES (?,?,?,?,?,?)",
        [k + (reads[k], archived[k], archived_read[k]) for k in set(reads) | set(archived)],
    )


def verify_counters(db: pw.SqliteDatabase) -> list[str]:
    """Compare the trigger-kept counter tables with sums computed from scratch.

    Returns a description of every difference (empty when consistent); for tests
    and `thrum doctor`-style checks.
    """
    problems = []
    specs = {
        "sig_totals": ("SELECT sig_id, n FROM sig_totals WHERE n != 0", 1),
        "sig_author_totals": ("SELECT author, sig_id, n FROM sig_author_totals WHERE n != 0", 2),
        "agent_sig_counts": (
            "SELECT agent_id, sig_id, own, n_read, n_arch, n_read_arch FROM agent_sig_counts "
            "WHERE n_read != 0 OR n_arch != 0 OR n_read_arch != 0",
            3,
        ),
    }
    for table, (sql, nkey) in specs.items():
        kept = {tuple(r[:nkey]): tuple(r[nkey:]) for r in all_rows(db, sql)}
        fresh = {tuple(r[:nkey]): tuple(r[nkey:]) for r in all_rows(db, COUNTER_QUERIES[table]) if any(r[nkey:])}
        for key in sorted(set(kept) | set(fresh), key=repr):
            if kept.get(key) != fresh.get(key):
                problems.append(f"{table}{key}: kept {kept.get(key)} computed {fresh.get(key)}")
    return problems

"""A rebuild's search index, built on a second connection and thread beside the query indexes.

After a rebuild's load, the finishing steps (`database.finish_schema`) are the query
indexes and counters (one connection, ~45 % of the steps' CPU) and the search index
(~55 %). Each is a few long SQLite statements, which run without the GIL, so on two cores
they can run at the same time; but two connections cannot both write one database file.
So the search index is built into a file of its own beside the projection
(``<db>.search``, attached to a second connection that reads the messages from the
projection) while the first connection builds the rest, and its shadow tables are copied
into the projection at the end, in the transaction that writes the schema version. The
index built that way is the one `search_index.build` builds in place, the same steps on
the same rows (one segment on the top level: `search_index._fill_on_top`).

What makes it safe:

- The projection is in WAL mode while both run (`start` switches it from the load's
  journal mode and `Beside.close` back): the second connection reads one snapshot of the
  messages (committed before it starts, with the threads' subjects and the views the index
  reads through: `search_index.prepare`) while the first writes indexes.
- A failure on either side fails the rebuild: the other side is interrupted and waited
  for, the side file deleted and the error raised, before the schema version is written
  (a database without one is rebuilt again, and the daemon swaps in only a rebuild that
  returned).
- Not for small histories (`MIN_MESSAGES`), an in-memory database, or one whose journal
  mode cannot change (another connection is open): then `start` says None and the
  index is built in place as before.

Measured: docs/design/decisions.md ("Rebuilds on a large history").
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from typing import Callable

import peewee as pw

from . import search_index
from .sql import scalar

log = logging.getLogger(__name__)

MIN_MESSAGES = 20_000  # fewer (by rowid): built in place, where a thread and a file cost more than they save
SIDE_SUFFIX = ".search"
SIDE_SCHEMA = "thrum_search"
SIDE_CACHE_KIB = 16 * 1024  # the second connection's page cache (it reads the messages in order)
ALIVE_S = 5.0  # a rebuild waiting for the index says it is alive this often (`wait`)
STOP_CHECK_STEPS = 100_000  # SQLite instructions of the second connection between looks at `Beside.close`


class Beside:
    """The search index being built on its own connection and thread (`start`), then
    `adopt`-ed into the projection, or thrown away; `close` in every case."""

    def __init__(self, db: pw.SqliteDatabase, path: str, journal_mode: str):
        self.db = db
        self.side_path = path + SIDE_SUFFIX
        self.cpu = 0.0  # the thread's CPU seconds
        self.wall = 0.0  # and its wall seconds
        self._journal_mode = journal_mode  # the projection's, put back by `close`
        self._error: BaseException | None = None
        self._stopping = False
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # a statement of the second connection ends (interrupted) soon after `close` asks
        self._conn.set_progress_handler(lambda: self._stopping, STOP_CHECK_STEPS)
        self._thread = threading.Thread(target=self._run, name="thrum-search-index", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started, started_cpu = time.perf_counter(), time.thread_time()
        try:
            _remove(self.side_path)  # (a rebuild that stopped half-way left it)
            conn = self._conn
            conn.execute("PRAGMA mmap_size=0")  # as the first connection: mapped pages count as the process's
            conn.execute(f"PRAGMA cache_size=-{SIDE_CACHE_KIB}")
            conn.execute("ATTACH DATABASE ? AS " + SIDE_SCHEMA, (self.side_path,))
            conn.execute(f"PRAGMA {SIDE_SCHEMA}.journal_mode=OFF")  # thrown away if anything fails
            conn.execute(f"PRAGMA {SIDE_SCHEMA}.synchronous=OFF")
            _build_into(conn, SIDE_SCHEMA)
        except BaseException as exc:  # noqa: BLE001 - handed to the rebuild's thread by `wait`
            self._error = exc
        finally:
            self.cpu = time.thread_time() - started_cpu
            self.wall = time.perf_counter() - started

    def wait(self, alive: Callable[[], None] | None = None) -> None:
        """Until the index is built, calling ``alive`` every `ALIVE_S` meanwhile (the rebuild's
        heartbeat: this thread runs no statement then); raises what failed on the second
        connection."""
        while True:
            self._thread.join(ALIVE_S)
            if not self._thread.is_alive():
                break
            if alive is not None:
                alive()
        if self._error is not None:
            raise SearchIndexFailed(f"building the search index failed: {self._error}") from self._error

    def adopt(self, alive: Callable[[], None] | None = None) -> None:
        """Wait for the index, then make it the projection's: the table created, its shadow
        tables copied in (`search_index.SHADOW_TABLES`: what FTS5 keeps), then its triggers;
        in a transaction of its own."""
        self.wait(alive)
        self._conn.close()  # its work is done: the projection's journal mode goes back before the
        self.db.execute_sql(f"PRAGMA journal_mode={self._journal_mode}")  # copy (not written twice)
        self.db.execute_sql(f"ATTACH DATABASE ? AS {SIDE_SCHEMA}", (self.side_path,))
        with self.db.atomic():
            self.db.execute_sql(search_index.CREATE_TABLE)
            for shadow in search_index.SHADOW_TABLES:
                self.db.execute_sql(f"DELETE FROM main.{shadow}")
                self.db.execute_sql(f"INSERT INTO main.{shadow} SELECT * FROM {SIDE_SCHEMA}.{shadow}")
            for sql in search_index.TRIGGERS:
                self.db.execute_sql(sql)

    def close(self) -> None:
        """Stop the second connection if it still works (the rebuild failed), delete the side
        file and put the projection's journal mode back."""
        self._stopping = True
        self._thread.join()
        self._conn.close()
        try:
            if SIDE_SCHEMA in [r[1] for r in self.db.execute_sql("PRAGMA database_list").fetchall()]:
                self.db.execute_sql(f"DETACH DATABASE {SIDE_SCHEMA}")
        finally:
            try:
                _remove(self.side_path)
            except OSError as exc:  # left for the next rebuild's thread to remove (or fail on)
                log.warning("the search index's side file stays: %s", exc)
            self.db.execute_sql(f"PRAGMA journal_mode={self._journal_mode}")


class SearchIndexFailed(RuntimeError):
    """The second connection could not build the search index (its reason chained)."""


def start(db: pw.SqliteDatabase) -> Beside | None:
    """Start building the search index beside the projection, or None when it is to be built
    in place (a small history, an in-memory database, the journal mode cannot change)."""
    path = str(db.database)
    if path in ("", ":memory:") or path.startswith("file:") or db.in_transaction():
        return None
    if (scalar(db, "SELECT coalesce(max(rowid), 0) FROM messages") or 0) < MIN_MESSAGES:
        return None
    mode = str(db.execute_sql("PRAGMA journal_mode").fetchone()[0]).lower()
    if mode != "wal" and str(db.execute_sql("PRAGMA journal_mode=WAL").fetchone()[0]).lower() != "wal":
        return None  # another connection holds the file
    search_index.prepare(db)  # committed: what the second connection reads the index from
    return Beside(db, path, mode)


def _build_into(conn: sqlite3.Connection, schema: str) -> None:
    """Build the index into the database attached to ``conn`` as ``schema``, from the messages
    of ``conn``'s main database, as `search_index.build` builds it in place (`search_index.fill`:
    the same steps on the same rows, so the same shadow tables), in one transaction: one
    snapshot of the messages. Nothing is written to the main database.

    The index's content table is the main database's view, which the attached file does not
    have: nothing here reads content through the index (FTS5 reads it only for 'rebuild',
    'integrity-check', auxiliary functions and deletes without values).
    """
    conn.execute("BEGIN")
    try:
        search_index.fill(conn, f"{schema}.{search_index.TABLE}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _remove(path: str) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass

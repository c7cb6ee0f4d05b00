"""Opening the projection database: pragmas, creating and dropping the schema, its version.

The schema itself (tables, views, indexes) is `thrum.store.models`; the counter
triggers are `thrum.store.counters`. Everything here can be thrown away and
rebuilt from the log (`thrum.store.rebuild`): bump `SCHEMA_VERSION` whenever a
table changes and the daemon rebuilds on start.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import peewee as pw

from . import search_beside, search_index
from .counters import COUNTER_TRIGGERS, compute_counter_tables
from .models import FOLD_INDEXES, QUERY_INDEXES, SCHEMA_VERSION, TABLE_MODELS, VIEWS
from .sql import all_rows, one_row

__all__ = [
    "PRAGMAS",
    "SCHEMA_VERSION",
    "create_schema",
    "create_tables",
    "drop_schema",
    "finish_schema",
    "open_database",
    "schema_version",
]


PRAGMAS = {
    "journal_mode": "wal",
    "synchronous": "normal",  # the log is the durable copy; the projection is rebuildable
    "foreign_keys": 0,  # receipts and edits may arrive before their message
    "cache_size": -65536,
    "temp_store": "memory",
    "busy_timeout": 10000,
    "mmap_size": 1 << 30,  # read pages in place instead of copying them into the cache
}


def open_database(path: Path | str) -> pw.SqliteDatabase:
    """Open (creating if needed) the projection database in WAL mode.

    Models are bound per call (`bind_ctx`), so several databases can live in one
    process (tests, benchmarks).
    """
    db = pw.SqliteDatabase(str(path), pragmas=PRAGMAS, check_same_thread=False)
    db.connect(reuse_if_open=True)
    return db


def close_database(db: pw.SqliteDatabase) -> None:
    """Close ``db`` with everything in the database file: the WAL checkpointed first.

    SQLite empties the WAL only when its last connection closes, and the connections of
    threads that read (one per thread) close only when collected at exit, if at all: without
    the checkpoint the WAL could outlive a stopped daemon holding folded transactions.
    Errors are ignored: the caller is stopping anyway, and the WAL still holds what it held.
    """
    try:
        db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    except Exception:  # noqa: BLE001 - a busy or broken database: closed as it is
        pass
    try:
        db.close()
    except Exception:  # noqa: BLE001 - stopping anyway
        pass


def create_schema(db: pw.SqliteDatabase) -> None:
    """Create every table, index and trigger (if missing) and record SCHEMA_VERSION."""
    with db.atomic():
        create_tables(db)
        finish_schema(db)


def create_tables(db: pw.SqliteDatabase) -> None:
    """Tables and the indexes the fold reads through; no query indexes, no triggers,
    no schema version (a rebuild loads into this, then calls `finish_schema`)."""
    with db.bind_ctx(TABLE_MODELS), db.atomic():
        db.create_tables(TABLE_MODELS, safe=True)
        for sql in FOLD_INDEXES + VIEWS:
            db.execute_sql(sql)


def finish_schema(
    db: pw.SqliteDatabase,
    *,
    compute_counters: bool = False,
    timings: dict[str, float] | None = None,
    alive: Callable[[], None] | None = None,
) -> None:
    """Query indexes, counter triggers, the search index and the schema version.

    ``compute_counters``: fill the counter tables from the data first (after a bulk
    load without triggers: a rebuild). The search index is built in one pass over the rows
    (`search_index.build`); in a rebuild of a large history, on a second connection and
    thread while this one builds the query indexes and counters, then copied in
    (`search_beside`). ``timings``: seconds of each step, ``indexes_and_counters`` and
    ``search_index`` (beside: the wait for it and its copy), and within the first
    ``index NAME`` per query index and ``counters``: what deferring one would save;
    ``cpu ...``: CPU seconds of the process during the two, ``cpu counters`` of this thread,
    ``cpu finish`` of the process in all. Beside: ``search_index thread`` and ``cpu
    search_index thread``, the second thread's wall and CPU seconds, ``search_index wait``,
    how long this one waited for it, ``search_index copy``, the copy. The schema version
    is written last, so a database whose rebuild was interrupted or failed has none and is
    rebuilt again. ``alive``: called every few seconds while this thread waits for the
    other (it runs no statement then, so SQLite's progress handler is silent).
    """
    started, started_cpu = time.perf_counter(), time.process_time()
    steps: dict[str, float] = {}
    beside = search_beside.start(db) if compute_counters else None
    try:
        with db.atomic():
            for sql in QUERY_INDEXES:
                at = time.perf_counter()
                db.execute_sql(sql)
                steps["index " + sql.split(" IF NOT EXISTS ")[1].split()[0]] = time.perf_counter() - at
            at, at_cpu = time.perf_counter(), time.thread_time()
            if compute_counters:
                compute_counter_tables(db)
            for sql in COUNTER_TRIGGERS:
                db.execute_sql(sql)
            steps["counters"], steps["cpu counters"] = time.perf_counter() - at, time.thread_time() - at_cpu
            indexed, indexed_cpu = time.perf_counter(), time.process_time()
            if beside is None:
                search_index.build(db)
        if beside is not None:
            at = time.perf_counter()
            beside.wait(alive)
            steps["search_index wait"] = time.perf_counter() - at
            beside.adopt()
            steps["search_index copy"] = time.perf_counter() - at - steps["search_index wait"]
            steps["search_index thread"], steps["cpu search_index thread"] = beside.wall, beside.cpu
    finally:
        if beside is not None:
            beside.close()
    with db.atomic():
        if (one_row(db, "SELECT count(*) FROM schema_version") or (0,))[0] == 0:
            db.execute_sql("INSERT INTO schema_version(version) VALUES (?)", (SCHEMA_VERSION,))
    if timings is not None:
        timings["indexes_and_counters"] = indexed - started
        timings["search_index"] = time.perf_counter() - indexed
        timings["cpu indexes_and_counters"] = indexed_cpu - started_cpu
        timings["cpu search_index"] = time.process_time() - indexed_cpu
        timings["cpu finish"] = time.process_time() - started_cpu
        timings.update(steps)


def schema_version(db: pw.SqliteDatabase) -> int | None:
    """The version recorded in the database, or None when it has no (or a broken) schema."""
    try:
        row = one_row(db, "SELECT max(version) FROM schema_version")
    except pw.DatabaseError:
        return None
    return row[0] if row else None


def drop_schema(db: pw.SqliteDatabase) -> None:
    """Drop every view and table (their indexes and triggers go with them); virtual tables
    (the search index) before the tables they keep their data in."""
    objects = all_rows(
        db,
        "SELECT type, name FROM sqlite_master WHERE type IN ('view', 'table') AND name NOT LIKE 'sqlite_%' "
        "ORDER BY type = 'table', coalesce(sql, '') NOT LIKE 'CREATE VIRTUAL TABLE%'",
    )
    with db.atomic():
        for kind, name in objects:
            db.execute_sql(f'DROP {kind.upper()} IF EXISTS "{name}"')

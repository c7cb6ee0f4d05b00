"""Bringing the projection up to date with the log: catch up, rebuild, and opening it at start-up.

Rules (part of the projection's rules, `thrum.store.projection`):

- `catch_up` folds only what the log holds beyond the stored positions, in
  batches that each save their positions in the same transaction, so an
  interrupted catch-up resumes where it stopped.
- `rebuild` throws every table away and folds the whole log; it gives the same
  query results as catching up event by event. It loads without query indexes
  and counter triggers and builds both once at the end; the schema version is
  written last, so an interrupted rebuild is redone.
- `open_projection` (daemon start-up): catch up when the schema version matches,
  rebuild when it does not, and throw the file away and rebuild when SQLite
  cannot read it or catching up fails. The log is always the truth. It says
  whether it rebuilt (`Opened`): start-up's coverage check is then skipped.
- A rebuild reports how far it is (`Progress`) after every batch and at each
  phase, and every few seconds while its indexes are built, so that whoever waits
  for it (``thrum init`` on a large history) can show a rate and an estimate
  instead of silence.
- A rebuild's load is one transaction (the fold's batches are savepoints in it); a batch
  a handler fails in, which a load without a journal cannot undo, has the load done again
  with one (`fold.UndoImpossible`).
- A rebuild can read, decode and judge each batch in a thread while the batch before is
  folded (``reader="thread"``: `readahead.ReaderThread`, `JudgesAhead`; the same batches in
  the same order, half as large). Off by default: measured quiet, the GIL made the two
  threads take turns (`READ_AHEAD_BYTES`).
- A rebuild of a large log (`JUDGE_APART_BYTES`) on two cores has a second process judge
  its lines (``judge="apart"``: `judge_process`): the folding process reads and decodes
  each batch for its fold and applies the ruling that process sent for it; the fold then
  takes over what that process learned. A second process that fails has the load done
  again judging here (`JudgeFailed`).
- A rebuild's load and its finishing steps each run with their own connection
  settings (`LOAD_PRAGMAS`, `FINISH_PRAGMAS`: cache, sorter, map), put back after;
  with batches bounded in bytes too, that keeps its peak memory under 1 GiB at a
  million messages (docs/design/decisions.md).
"""

from __future__ import annotations

import gc
import logging
import os
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Protocol, runtime_checkable

import peewee as pw

from ..events.ids import now_rfc3339
from . import chain_fold, database, readahead
from .fold import FoldResult, UndoImpossible, fold, load_positions
from .log import EventLog, LogIssue, Position
from .sql import all_rows

log = logging.getLogger(__name__)

REBUILD_BATCH = 50_000
# A batch also ends after this many bytes of the log: a receipt names up to 100 messages,
# so 50,000 receipts are 5,000,000 read marks held as Python objects at once (measured at a
# million messages: +370 MB of the rebuild's peak, when the receipts were folded). 16 MiB
# cost the load CPU, 48 MiB memory (docs/design/decisions.md).
REBUILD_BATCH_BYTES = 24 * 1024 * 1024
READ_CHUNK = 32 * 1024 * 1024  # bytes of a shard read (and folded) at a time
# From this many bytes of log, ``reader="auto"`` reads and decodes it in a thread, a batch
# ahead of the fold (`readahead.ReaderThread`). None: never. Measured on the quiet 2-core
# machine, reading ahead saved no wall time (the GIL lets the reader's Python and the fold's
# Python take turns; 200,000 and 1,000,000 messages), for 2-5 % more CPU: off until a
# Python without the GIL (docs/design/decisions.md, "Rebuilds on a large history").
READ_AHEAD_BYTES: int | None = None
# From this many bytes of log, ``judge="auto"`` has a second process judge the lines
# (`judge_process`: the trust check off the folding core) when two cores are usable: its
# start (~0.2 s) and its own decoding of the log are paid back from about 100,000 lines.
JUDGE_APART_BYTES: int | None = 64 * 1024 * 1024
# The connection's settings for the two phases of a rebuild (restored after each). The load
# writes rows at scattered places of large b-trees: it wants a large page cache. The
# finishing steps (`database.finish_schema`) read the tables in order and write each index
# in order, so a small cache does; its size also bounds each in-memory run of SQLite's
# sorter, which spills to a temporary file (with ``temp_store`` FILE: memory would keep
# every run, and would stop the sorter's worker threads). Peak memory: docs/design/decisions.md.
LOAD_PRAGMAS: dict[str, str | int] = {
    "synchronous": "OFF",
    "cache_size": -512 * 1024,  # KiB (negative: a size, not pages)
    "journal_mode": "OFF",  # stays as it is if another connection is open
}
FINISH_PRAGMAS: dict[str, str | int] = {
    "cache_size": -64 * 1024,
    "temp_store": "FILE",
    "threads": 2,  # index builds may sort on a second core
    "mmap_size": 0,  # pages read through the map count as the process's memory, ~800 MB at a million
}
# The finishing steps are a few long statements (at a million messages, tens of seconds
# each on a busy machine); whoever waits for the rebuild hears from it at least this often
# meanwhile (`lifecycle.start` gives up after 60 s of silence).
HEARTBEAT_S = 5.0
HEARTBEAT_STEPS = 1_000_000  # SQLite instructions between looks at the clock (~ms apart)


class FoldFn(Protocol):
    """A fold that judges lines first (`thrum.store.verified`): records, then their raw lines."""

    def __call__(
        self,
        db: pw.SqliteDatabase,
        records: list[tuple[str, dict[str, Any]]],
        lines: list[bytes],
        *,
        issues: Iterable[LogIssue] = (),
        positions: dict[str, Position] | None = None,
        keep_applied: bool = True,
    ) -> FoldResult: ...

    def release(self) -> None:
        """Let go of what a large fold loaded (the verdict memory): a rebuild's load is over."""


@runtime_checkable
class JudgesAhead(Protocol):
    """A `FoldFn` whose judging can run ahead of its folding (`verified.VerifiedFold`): a
    rebuild reading ahead has its reader judge each batch (``judge_ahead()``'s judge, which
    may say None: judge it with its fold) and folds the judged batch (``apply_judged``)."""

    def judge_ahead(self) -> Callable[[list[tuple[str, dict[str, Any]]], list[bytes]], Any]: ...

    def apply_judged(
        self,
        db: pw.SqliteDatabase,
        judged: Any,
        *,
        issues: Iterable[LogIssue] = (),
        positions: dict[str, Position] | None = None,
        keep_applied: bool = True,
    ) -> FoldResult: ...


@runtime_checkable
class JudgesApart(Protocol):
    """A `FoldFn` whose judging a second process can do for a rebuild (`verified.VerifiedFold`,
    `judge_process`): ``judge_apart`` starts it (None: it cannot), and each batch it
    judged is folded by ``apply_ruling``."""

    def judge_apart(self, event_log: EventLog, **sizes: int) -> Any: ...

    def apply_ruling(
        self,
        db: pw.SqliteDatabase,
        found: Any,
        *,
        issues: Iterable[LogIssue] = (),
        positions: dict[str, Position] | None = None,
        keep_applied: bool = True,
    ) -> FoldResult: ...


class JudgeFailed(RuntimeError):
    """The second process judging a rebuild's log failed or said something malformed."""


def usable_cores() -> int:
    """The cores this process may run on (its affinity: a container's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this system
        return os.cpu_count() or 1


class Progress(Protocol):
    """Told how far a rebuild is: ``phase`` is ``load`` (events folded, bytes of the
    log read of ``total_bytes``), then ``indexes`` (query and search indexes being
    built: no count; told again at least every `HEARTBEAT_S` while they are), then
    ``done``; ``elapsed``: seconds since the rebuild started."""

    def __call__(self, phase: str, events: int, done_bytes: int, total_bytes: int, elapsed: float) -> None: ...


def catch_up(db: pw.SqliteDatabase, event_log: EventLog, fold_fn: FoldFn | None = None) -> FoldResult:
    """Fold whatever the log holds beyond the stored positions (all of it for a new db).

    Shards are read in chunks of about READ_CHUNK bytes and folded in batches of
    about REBUILD_BATCH events or REBUILD_BATCH_BYTES of the log, whichever comes first,
    each in one transaction together with the new
    positions of what it covers, so an interrupted catch-up resumes where it stopped.
    """
    with collector_paused():
        return _fold_log(db, event_log, load_positions(db), fold_fn=fold_fn)


def _fold_log(
    db: pw.SqliteDatabase,
    event_log: EventLog,
    positions: dict[str, Position],
    *,
    keep_applied: bool = True,
    fold_fn: FoldFn | None = None,
    progress: Progress | None = None,
    reader: str = "here",
    judge: str = "here",
) -> FoldResult:
    """Fold the log beyond ``positions`` batch by batch (`readahead.log_batches`), read
    ``here`` (in this thread, in turn with the fold) or by a ``thread`` one batch ahead
    (`readahead.ReaderThread`: from the start of the log only, in batches half as large,
    as two are alive at once), which also judges it when the fold can (`JudgesAhead`).
    ``judge="apart"``: a second process judges the batches read here, when the fold can
    hand its state over (`JudgesApart`; from the start of the log only)."""
    assert reader == "here" or not positions, "a reader ahead reads the log from its start"
    assert judge == "here" or (reader == "here" and not positions), "a second process judges the whole log"
    total = FoldResult()
    started = time.perf_counter()
    sized = progress is not None
    total_bytes = _log_bytes(event_log) if sized else 0
    events = 0
    ahead = reader == "thread"
    share = 2 if ahead else 1
    sizes = {"batch_events": max(1, REBUILD_BATCH // share), "batch_bytes": max(1, REBUILD_BATCH_BYTES // share)}
    source: Any = nullcontext(readahead.log_batches(event_log, positions, **sizes, chunk=READ_CHUNK, sized=sized))
    if ahead:
        judge_ahead = fold_fn.judge_ahead() if isinstance(fold_fn, JudgesAhead) else None
        source = readahead.ReaderThread(event_log, **sizes, chunk=READ_CHUNK, sized=sized, judge=judge_ahead).start()
    apart = None
    if judge == "apart" and isinstance(fold_fn, JudgesApart):
        apart = fold_fn.judge_apart(event_log, **sizes, chunk=READ_CHUNK)
    with source as batches, apart if apart is not None else nullcontext():
        for batch in batches:
            pending = batch.result
            events += len(pending.records)
            ruled = apart.ruling(pending) if apart is not None else None
            if pending.records or pending.issues or pending.positions:
                if fold_fn is None:
                    total.merge(
                        fold(
                            db,
                            pending.records,
                            issues=pending.issues,
                            positions=pending.positions,
                            keep_applied=keep_applied,
                        )
                    )
                elif ruled is not None:
                    assert isinstance(fold_fn, JudgesApart)
                    total.merge(
                        fold_fn.apply_ruling(
                            db,
                            ruled,
                            issues=pending.issues,
                            positions=pending.positions,
                            keep_applied=keep_applied,
                        )
                    )
                elif batch.judged is not None:
                    assert isinstance(fold_fn, JudgesAhead)
                    total.merge(
                        fold_fn.apply_judged(
                            db,
                            batch.judged,
                            issues=pending.issues,
                            positions=pending.positions,
                            keep_applied=keep_applied,
                        )
                    )
                else:
                    total.merge(
                        fold_fn(
                            db,
                            pending.records,
                            pending.lines,
                            issues=pending.issues,
                            positions=pending.positions,
                            keep_applied=keep_applied,
                        )
                    )
            if progress is not None:
                progress("load", events, min(total_bytes, batch.read), total_bytes, time.perf_counter() - started)
            del batch, pending, ruled  # not kept while the next batch is read
        if apart is not None:
            apart.finish()
    return total


def _ways(event_log: EventLog, fold_fn: FoldFn | None, reader: str, judge: str) -> tuple[str, str]:
    """Where a rebuild reads its log and judges its lines (``auto`` made a choice: `rebuild`)."""
    if reader == "auto":
        ahead = READ_AHEAD_BYTES is not None and _log_bytes(event_log) >= READ_AHEAD_BYTES
        reader = "thread" if ahead else "here"
    if judge == "auto":
        apart = (
            JUDGE_APART_BYTES is not None
            and reader == "here"
            and isinstance(fold_fn, JudgesApart)
            and usable_cores() > 1
            and _log_bytes(event_log) >= JUDGE_APART_BYTES
        )
        judge = "apart" if apart else "here"
    return reader, judge


def _log_bytes(event_log: EventLog) -> int:
    return sum(_size(event_log, s) for s in event_log.shards())


def _size(event_log: EventLog, shard: str) -> int:
    try:
        return event_log.path(shard).stat().st_size
    except OSError:
        return 0


def rebuild(
    db: pw.SqliteDatabase,
    event_log: EventLog,
    *,
    keep_applied: bool = False,
    fold_fn: FoldFn | None = None,
    progress: Progress | None = None,
    reader: str = "auto",
    judge: str = "auto",
) -> FoldResult:
    """Drop and recreate every table, then fold the whole log.

    Loads without query indexes and counter triggers, then builds both once
    (`database.finish_schema`), which is much faster than maintaining them row by
    row. The schema version is written last: an interrupted rebuild leaves a
    database without one, which the daemon rebuilds again. The ``kv`` table
    (daemon state that is not in the log) is kept. ``keep_applied``: return the
    applied events in the result (memory grows with the log). ``progress``: told
    how far it is (`Progress`). ``reader``: where the log is read and decoded (`_fold_log`);
    ``auto``: by a thread one batch ahead of the fold when the log holds at least
    `READ_AHEAD_BYTES` (None: never), in turn with the fold otherwise. ``judge``: where the
    lines are judged; ``apart``: by a second process (`judge_process`), when the fold can
    hand its state over; ``auto``: so when the log holds at least `JUDGE_APART_BYTES` (None:
    never), the log is read here and two cores are usable; ``here`` otherwise. A second
    process that fails has the load done again judging here (`JudgeFailed`).
    """
    reader, judge = _ways(event_log, fold_fn, reader, judge)
    kv = _saved_kv(db)
    database.drop_schema(db)
    database.create_tables(db)
    with collector_paused():
        # The log is the durable copy and an interrupted rebuild is redone (no schema
        # version), so the load needs neither syncs nor a journal; it does need cache.
        with _pragmas(db, LOAD_PRAGMAS):
            started, started_cpu = time.perf_counter(), time.process_time()
            seen = [0]  # events the load read, as last reported

            def load_progress(phase: str, events: int, done_bytes: int, total_bytes: int, elapsed: float) -> None:
                seen[0] = events
                if progress is not None:
                    progress(phase, events, done_bytes, total_bytes, elapsed)

            def load(judge: str) -> FoldResult:
                with chain_fold.deferred():  # the writers' chains are settled once, after the load
                    return _fold_log(
                        db,
                        event_log,
                        {},
                        keep_applied=keep_applied,
                        fold_fn=fold_fn,
                        progress=load_progress,
                        reader=reader,
                        judge=judge,
                    )

            try:
                # One transaction for the whole load (the fold's batches are savepoints in
                # it): a batch's commit wrote out every page it touched across the big
                # tables again, ~13 % of the load at a million events (BENCHMARKS.md).
                try:
                    with db.atomic():
                        total = load(judge)
                except JudgeFailed as exc:
                    # The second process judging the lines failed: this process's fold took
                    # nothing over from it (`judge_process`), so the load is done again,
                    # judging here; what that process wrote (keys, facts, verdicts) is what
                    # judging the same lines here writes.
                    log.warning("the rebuild's second process failed (%s): loading the log again, judging here", exc)
                    database.drop_schema(db)
                    database.create_tables(db)
                    with db.atomic():
                        total = load("here")
            except UndoImpossible as exc:
                # An event made a handler fail, and without a journal the batch's writes
                # could not be undone before its events were folded one by one: load again
                # with a journal in memory (rare: it takes a line the schema let through
                # that a handler cannot apply), so the result is the incremental fold's.
                log.warning("a rebuild batch failed (%s): loading the log again with a journal", exc)
                database.drop_schema(db)
                database.create_tables(db)
                db.execute_sql("PRAGMA journal_mode=MEMORY")
                total = load("here")
            total.timings = {"load": time.perf_counter() - started, "cpu load": time.process_time() - started_cpu}
            at, at_cpu = time.perf_counter(), time.process_time()
            with db.atomic():
                chain_fold.settle(db.connection(), now_rfc3339())
            total.timings["chains"] = time.perf_counter() - at
            total.timings["cpu chains"] = time.process_time() - at_cpu
            folded = seen[0]
            if progress is not None:
                progress("indexes", folded, 0, 0, total.timings["load"])
            if fold_fn is not None:
                fold_fn.release()  # what the load needed (the verdict memory) is not needed to finish

            def finishing(now: float) -> None:
                if progress is not None:
                    progress("indexes", folded, 0, 0, now - started)

            with _pragmas(db, FINISH_PRAGMAS), _heartbeat(db, finishing) if progress else nullcontext():
                alive = (lambda: finishing(time.perf_counter())) if progress else None  # (waiting for the search index)
                database.finish_schema(db, compute_counters=True, timings=total.timings, alive=alive)
            if progress is not None:
                progress("done", folded, 0, 0, time.perf_counter() - started)
            if kv:
                with db.atomic():
                    db.connection().executemany("INSERT OR REPLACE INTO kv(key, value) VALUES (?,?)", kv)
    return total


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off for a bulk read and fold (a rebuild, a catch-up, a
    received chunk): the decoded events are tens of thousands of short-lived dicts with
    no cycles, and the collector would rescan them, and everything the process holds,
    again and again (on a 10,000-line receive: ~40 ms of the ~110 ms its decoding takes).
    Put back as it was; cyclic garbage made meanwhile is collected after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def _heartbeat(db: pw.SqliteDatabase, tell: Callable[[float], None]) -> Iterator[None]:
    """Call ``tell(now)`` at most every `HEARTBEAT_S` while SQLite works in the block (its
    progress handler, every `HEARTBEAT_STEPS` instructions of its virtual machine)."""
    conn = db.connection()
    last = [time.perf_counter()]

    def handler() -> int:
        now = time.perf_counter()
        if now - last[0] >= HEARTBEAT_S:
            last[0] = now
            try:
                tell(now)
            except Exception:  # noqa: BLE001 - a report that fails must not abort the statement
                log.exception("a rebuild progress report failed")
        return 0  # go on

    conn.set_progress_handler(handler, HEARTBEAT_STEPS)
    try:
        yield
    finally:
        conn.set_progress_handler(None, 0)


@contextmanager
def _pragmas(db: pw.SqliteDatabase, values: dict[str, str | int]) -> Iterator[None]:
    """Set the connection's ``values`` (PRAGMA name -> value) for the block, then put back
    what they were."""
    saved = {name: db.execute_sql(f"PRAGMA {name}").fetchone()[0] for name in values}
    try:
        for name, value in values.items():
            db.execute_sql(f"PRAGMA {name}={value}")
        yield
    finally:
        for name, value in reversed(saved.items()):
            db.execute_sql(f"PRAGMA {name}={value}")


def _saved_kv(db: pw.SqliteDatabase) -> list[tuple[str, str]]:
    try:
        return all_rows(db, "SELECT key, value FROM kv")
    except pw.DatabaseError:
        return []


def open_outdated(path: str | os.PathLike[str]) -> pw.SqliteDatabase | None:
    """The projection at ``path`` when it is complete but of another schema version, opened
    as it is (not caught up: this build's fold may not fit it), to serve reads from while
    its successor is built beside it and swapped in (the daemon's upgrade). None when there
    is no file, it has the current version, no version (an interrupted rebuild), or SQLite
    cannot read it: then `open_projection` decides."""
    if not os.path.exists(path):
        return None
    db = None
    try:
        db = database.open_database(os.fspath(path))
        version = database.schema_version(db)
        if version is not None and version != database.SCHEMA_VERSION:
            db.execute_sql("SELECT 1 FROM messages LIMIT 1").fetchall()
            return db
    except Exception:  # noqa: BLE001 - unreadable: open_projection throws it away and rebuilds
        pass
    if db is not None:
        db.close()
    return None


class Opened(NamedTuple):
    """The projection `open_projection` opened, and whether it built it from the whole log."""

    db: pw.SqliteDatabase
    rebuilt: bool  # folded from the whole log now: it covers the log by construction (`coverage`)


def open_projection(
    path: str | os.PathLike[str], event_log: EventLog, fold_fn: FoldFn | None = None, progress: Progress | None = None
) -> Opened:
    """Open the database, rebuilding it from the log when missing, corrupt or outdated.

    No whole-file integrity scan at start-up (it would cost seconds on a large
    projection): a database SQLite cannot read, or whose catch-up fails, is
    thrown away and rebuilt from the log, which is always the truth.
    """
    db = None
    try:
        db = database.open_database(os.fspath(path))
        version = database.schema_version(db)
        if version == database.SCHEMA_VERSION:
            catch_up(db, event_log, fold_fn)
            return Opened(db, rebuilt=False)
        if version is not None:
            log.info("projection schema %s != %s: rebuilding", version, database.SCHEMA_VERSION)
        rebuild(db, event_log, fold_fn=fold_fn, progress=progress)
        return Opened(db, rebuilt=True)
    except Exception as exc:  # not a database, corrupt pages, a rebuild that hit either
        log.warning("projection database unusable (%s): rebuilding from the log", exc)
    if db is not None:
        try:
            db.close()
        except Exception:
            pass
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass
    db = database.open_database(os.fspath(path))
    rebuild(db, event_log, fold_fn=fold_fn, progress=progress)
    return Opened(db, rebuilt=True)

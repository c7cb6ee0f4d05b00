"""The daemon's single writer and its read helpers.

Write path (DESIGN §4): validate → build events → `Writer.write` → append to the
JSONL shards with fsync → fold into SQLite in one transaction → publish → reply.

Group commit: writes queue up while the previous batch is on disk; the writer
takes everything queued and makes it durable with one fsync per touched shard
and one SQLite transaction, so throughput grows with concurrency. A reply is
only sent after its batch is durable.

`lock` is held for every append+fold, and by the sync thread (`locked_from_thread`)
while it reads the files to commit and while each merged chunk is put in place, so
segment files are never replaced while being appended to. The sync thread never
touches the log or the database itself: it hands each chunk to `apply_remote`, which
replaces the merged segments through the log (`EventLog.replace_segments`) and folds
the lines they brought, like local ones (`thrum.store.verified` judges them first).

Failures (`thrum.daemon.view`): a failed append stores nothing (the log undoes
the batch) and every waiter hears so; a fold that fails *after* a durable append
acknowledges the batch anyway and leaves the view behind, to be caught up; a
corrupt database, met on a fold or a read, is rebuilt from the log.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any, Awaitable, Callable, TypeVar

import peewee as pw

import trio

from .. import errors
from .. import events as ev
from ..store import chain_fold, coverage, database, projection
from ..store.log import EventLog, Position
from ..store.verified import VerifiedFold
from .signer import RETIRING, Signer
from .view import ViewKeeper, is_corruption
from .worker import Worker

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_BATCH_EVENTS = 2000
# Queries running at once, each in a worker thread with its own SQLite connection and
# page cache: more only adds GIL contention on this hardware, and memory per thread.
READ_THREADS = 8


Subscriber = Callable[[list[dict[str, Any]], str], Awaitable[None] | None]


@dataclass
class _Pending:
    events: list[dict[str, Any]]
    done: trio.Event = field(default_factory=trio.Event)
    result: Any = None
    error: BaseException | None = None


class Writer:
    def __init__(
        self,
        db: pw.SqliteDatabase,
        event_log: EventLog,
        signer: Signer | None = None,
        fold_lines: VerifiedFold | None = None,
        db_path: os.PathLike[str] | str | None = None,
    ):
        self.db = db
        self.log = event_log
        self.signer = signer  # signs every event for its author (None only in tests of the bare writer)
        self._on_rejudged: list[Callable[[], None]] = []  # after the log was judged again (thrum.daemon.team)
        self.fold_lines = fold_lines  # judges lines read from files before folding (thrum.store.verified)
        self.view = ViewKeeper(self, db_path)  # behind the log? repairs (thrum.daemon.view)
        self._readers = trio.CapacityLimiter(READ_THREADS)
        self.lock = trio.Semaphore(1)  # not a Lock: the sync thread acquires/releases it via from_thread
        self._send, self._recv = trio.open_memory_channel[_Pending](float("inf"))
        self._subscribers: list[Subscriber] = []
        self.dirty_shards: set[str] = set()  # appended since the last sync commit
        self.events_written = 0
        self.batches_written = 0
        self._worker = Worker("thrum-writer")  # appends and folds every batch (daemon/worker.py)

    # ------------------------------------------------------------------ who hears of writes
    def subscribe(self, fn: Subscriber) -> None:
        """Call ``fn(applied, source)`` after every batch folded (local, sync, repair), in
        the order subscribed; a failing subscriber is logged and never breaks a write."""
        self._subscribers.append(fn)

    def when_rejudged(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` each time the whole log was judged again (`after_facts`)."""
        self._on_rejudged.append(fn)

    def ask_rejudge(self, reason: str) -> None:
        """Have the whole log judged again at the next `after_facts` (the team root changed)."""
        if self.fold_lines is not None:
            self.fold_lines.ask_rejudge(reason)

    def close(self) -> None:
        """The daemon stops: the database closed with its WAL checkpointed into the file
        (`database.close_database`; what is durable is in the log either way)."""
        database.close_database(self.db)

    def use_db(self, db: pw.SqliteDatabase) -> None:
        """The view's rebuild swapped the database file: read and fold from ``db`` now (lock held)."""
        self.db = db

    # ------------------------------------------------------------------ reads
    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a query in a worker thread (SQLite never runs on the event loop).

        A database SQLite calls corrupt is rebuilt from the log and the query run again.
        """
        try:
            return await trio.to_thread.run_sync(lambda: fn(self.db, *args, **kwargs), limiter=self._readers)
        except Exception as exc:
            if not is_corruption(exc) or self.view.db_path is None:
                raise
            await self.view.rebuild(f"{type(exc).__name__}: {exc}")
        return await trio.to_thread.run_sync(lambda: fn(self.db, *args, **kwargs), limiter=self._readers)

    async def write_local(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(db, ...)`` that writes local state (never the log: liveness marks) in a worker
        thread, under `lock` like every write, so it never lands in the middle of a fold."""
        async with self.lock:
            return await trio.to_thread.run_sync(lambda: fn(self.db, *args, **kwargs))

    # ------------------------------------------------------------------ writes
    async def write(self, events: Sequence[ev.Event | dict[str, Any]]) -> projection.FoldResult:
        """Make events durable and folded; returns once they are (group commit)."""
        dicts = [e if isinstance(e, dict) else e.to_dict() for e in events]
        if self.signer is not None:
            for d in dicts:
                self.signer.check(d)  # before queueing: a missing key fails this call alone (signed when appended)
        pending = _Pending(dicts)
        self._send.send_nowait(pending)
        await pending.done.wait()
        if pending.error is not None:
            raise pending.error
        result: projection.FoldResult = pending.result
        return result

    async def run_writer(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._worker.start()
        task_status.started()
        try:
            async with self._recv:
                while True:
                    first = await self._recv.receive()
                    # One scheduling round: handlers whose requests already arrived get to
                    # enqueue too, so concurrent clients share one fsync instead of
                    # alternating between a batch of one and a batch of the rest.
                    await trio.lowlevel.checkpoint()
                    await self._flush([first] + self._drain())
        finally:
            self._worker.stop()

    def _drain(self) -> list[_Pending]:
        batch = []
        count = 0
        while count < MAX_BATCH_EVENTS:
            try:
                item = self._recv.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            batch.append(item)
            count += len(item.events)
        return batch

    async def flush_pending(self) -> None:
        """Drain and write whatever is queued (used at shutdown)."""
        batch = self._drain()
        if batch:
            await self._flush(batch)

    async def _flush(self, batch: list[_Pending]) -> None:
        """Write ``batch``, cut after each write that retires a key (a revocation, a rotation):
        it is folded, and the roster knows, before anything queued after it is signed."""
        start = 0
        try:
            for i, p in enumerate(batch):
                if i == len(batch) - 1 or any(d.get("type") in RETIRING for d in p.events):
                    await self._flush_run(batch[start : i + 1])
                    start = i + 1
        except BaseException:  # cancelled (shutdown): the writes not reached hear so too
            for p in batch[start:]:
                if not p.done.is_set():
                    p.error = errors.Unavailable("the daemon is shutting down; nothing was stored")
                    p.done.set()
            raise

    async def _flush_run(self, batch: list[_Pending]) -> None:
        try:
            async with self.lock:
                result = await self._worker.run(self._append_and_fold, batch)
                # under the lock: a sync cycle's take counts them exactly
                self.events_written += sum(len(p.events) for p in batch if p.error is None)
        except BaseException as exc:  # noqa: BLE001 - every waiter must hear of it
            if isinstance(exc, OSError):  # disk full, permissions, ...: say so, nothing was acknowledged
                error: BaseException = errors.Unavailable(
                    f"cannot write the event log: {exc.strerror or exc}; nothing was stored"
                )
            elif isinstance(exc, Exception):
                error = exc
            else:
                error = errors.Unavailable("the daemon is shutting down; nothing was stored")
            for p in batch:
                p.error = p.error or error
                p.done.set()
            if not isinstance(exc, Exception):
                raise
            log.exception("write batch failed")
            return
        self.batches_written += 1
        self.view.wake_if_behind()
        for p in batch:
            p.result = result  # p.error, when set, says it was refused (its key retired since it was queued)
            p.done.set()
        await trio.lowlevel.checkpoint()  # let the waiting handlers reply before we fan out
        await self.publish(result.applied, "local")
        await self.after_facts()

    async def after_facts(self) -> None:
        """What a team fact asks for once its batch is folded (docs/design/trust.md): the whole
        log judged again when a key was retired or the root changed, or the lines a fact
        written here let through (an admission of a waiting registration) applied."""
        fold = self.fold_lines
        if fold is None:
            return
        reason = fold.take_rejudge()
        if reason:
            fold.forget_pending()
            await self.view.rebuild(reason, corrupt=False)
            for hook in self._on_rejudged:
                hook()
            return
        if getattr(fold, "unblocked_by_writes", None):
            await self.release_due()

    async def release_due(self) -> list[dict[str, Any]]:
        """Apply the held lines whose time has come and the ones a fact let through, under
        the lock; publishes what they change like a sync (`thrum.daemon.heldtimer`)."""
        fold = self.fold_lines
        if fold is None:
            return []
        async with self.lock:
            result = await trio.to_thread.run_sync(fold.release_due, self.db)
        if result.applied:
            await self.publish(result.applied, "sync")
        return result.applied

    def _append_and_fold(self, batch: list[_Pending]) -> projection.FoldResult:
        durable = None
        events = self._signable(batch)
        if not events:
            return projection.FoldResult()
        if self.signer is not None:  # chained here, in the order of the file (daemon/signer.py)
            events, durable = self.signer.sign_batch(events, self._stored_tip)
        lines = [ev.encode_line(d) for d in events]  # once: the log, the seals and the verdicts take the same bytes
        placed = self.log.append_events(events, lines)  # raises: nothing of the batch was stored
        if durable is not None:
            durable()
        touched = list(dict.fromkeys(placed))  # the segment each event went to, once each
        self.dirty_shards.update(touched)
        if self.signer is not None:
            for shard, d, line in zip(placed, events, lines):
                self.signer.appended(shard, d, line)
            if self.fold_lines is not None:
                self.fold_lines.remember_written(lines)
        # Durable from here on: whatever the fold does, the batch is acknowledged.
        try:
            try:
                return self._fold_appended(events, placed, touched)
            except Exception as exc:
                if not is_corruption(exc) or self.view.db_path is None:
                    raise
                self.view.rebuild_locked(f"{type(exc).__name__}: {exc}")  # folds the whole log, this batch too
                self.view.caught_up()
                return projection.FoldResult(applied=list(events))
        except Exception as exc:  # noqa: BLE001 - the view falls behind; it never skips these lines
            self.view.fell_behind(exc)
            return projection.FoldResult()

    def _signable(self, batch: list[_Pending]) -> list[dict[str, Any]]:
        """The events of the writes that may still be signed; a write whose key was retired
        (or went away) since it was queued is refused alone (its ``error`` set)."""
        if self.signer is not None:
            for p in batch:
                try:
                    for d in p.events:
                        self.signer.check(d)
                except errors.ThrumError as exc:
                    p.error = exc
        return [e for p in batch if p.error is None for e in p.events]

    def _stored_tip(self, author: str) -> tuple[int, str]:
        try:
            return chain_fold.tip(self.db, author)
        except Exception as exc:  # noqa: BLE001 - a broken view: this daemon's own tips still hold
            log.warning("cannot read %s's chain from the projection: %s", author, exc)
            return (0, "")

    def _fold_appended(
        self, events: list[dict[str, Any]], placed: list[str], touched: list[str]
    ) -> projection.FoldResult:
        if self.view.behind:  # stored positions are before lines a failed fold missed: take them too
            result = projection.catch_up(self.db, self.log, self.fold_lines)
            self.view.caught_up()
            return result
        # Stored positions are at each shard's end before this batch: fold just the batch.
        positions = {s: self.log.appended_end(s) for s in touched}
        records = list(zip(placed, events))  # each event with the segment it went to
        return projection.fold(self.db, records, positions=positions)

    async def repair(self) -> None:
        """Catch the view up with the log (rebuilding a corrupt database); publishes what it folds."""
        async with self.lock:
            result = await trio.to_thread.run_sync(self._repair_locked, abandon_on_cancel=False)
        await self.publish(result.applied, "repair")

    def _repair_locked(self) -> projection.FoldResult:
        try:
            result = projection.catch_up(self.db, self.log, self.fold_lines)
        except Exception as exc:
            if not is_corruption(exc) or self.view.db_path is None:
                raise
            self.view.rebuild_locked(f"{type(exc).__name__}: {exc}")
            result = projection.FoldResult()
        self.view.caught_up()
        return result

    def ensure_covered(self, reread: Sequence[str] = ()) -> tuple[str, ...]:
        """Start-up: the projection covers the log, or is made to (worker thread, before
        serving); ``reread``: shards to fold again from their start (`coverage.ensure_covered`).
        Returns the log files it found the projection missed and folded again (a corrupt
        database rebuilt from the whole log instead: none)."""
        try:
            gaps, _ = coverage.ensure_covered(self.db, self.log, self.fold_lines, reread)
        except Exception as exc:
            if not is_corruption(exc) or self.view.db_path is None:
                raise
            self.view.rebuild_locked(f"{type(exc).__name__}: {exc}")
            return ()
        return tuple(gaps)

    def append_seals(self) -> int:
        """Seal what was appended since the last commit (sync thread; caller holds `lock`).

        The seal lines go to the files their lines are in; the read positions move
        past them, so catching up never reads our own seals back.
        """
        seals = self.signer.take_seals() if self.signer is not None else []
        if not seals:
            return 0
        by_shard: dict[str, list[bytes]] = {}
        for shard, line in seals:
            by_shard.setdefault(shard, []).append(line)
        self.log.append_to(by_shard)
        self.dirty_shards.update(by_shard)
        if self.view.behind:  # positions stay before the lines not folded yet; catching up skips seals
            return len(seals)
        positions = {s: self.log.appended_end(s) for s in by_shard}
        try:
            with self.db.atomic():
                projection.save_positions(self.db, positions)
        except Exception as exc:  # noqa: BLE001 - the seals are durable; the view catches up over them
            self.view.fell_behind(exc)
        return len(seals)

    # ------------------------------------------------------------------ the sync thread's side
    @contextmanager
    def locked_from_thread(self) -> Iterator[None]:
        """`lock`, taken from a worker thread (the sync's): appends wait while it is held."""
        trio.from_thread.run(self.lock.acquire)
        try:
            yield
        finally:
            trio.from_thread.run_sync(self.lock.release)

    def take_appended(self) -> list[str]:
        """Seal what was appended since the last commit, then hand over the files appended
        to (sync thread, `locked_from_thread` held; `give_back_appended` if the commit fails)."""
        self.append_seals()
        taken = sorted(self.dirty_shards)
        self.dirty_shards.clear()
        return taken

    def give_back_appended(self, shards: list[str]) -> None:
        """Files `take_appended` handed over that were not committed: the next commit takes them."""
        self.dirty_shards.update(shards)

    def read_log_file(self, shard: str) -> tuple[bytes, os.stat_result] | None:
        """A segment as the sync reads it to commit or merge (any thread; never through a link)."""
        return self.log.read_file(shard)

    def apply_remote(
        self, writes: list[tuple[str, bytes]], received: dict[str, list[bytes]]
    ) -> tuple[list[os.stat_result], list[dict[str, Any]]]:
        """Take in one merged chunk from the sync thread (`locked_from_thread` held): the
        merged segments replace ours, and the lines new here are folded. Returns the stat
        of each file written and the events applied (to publish once the cycle ends).

        A fold that fails leaves the view behind (the files stand; it catches up from
        them); a write that fails raises, and the cycle fails with nothing folded.
        """
        stats = self.log.replace_segments(writes) if writes else []
        positions = {}
        for shard in dict.fromkeys([*received, *(p for p, _ in writes)]):
            try:
                positions[shard] = self.log.end_position(shard)
            except (OSError, ValueError):
                continue
        with projection.collector_paused():  # thousands of decoded dicts, no cycles among them
            read = self.log.decode(received)
            try:
                if self.fold_lines is not None:  # the remote is untrusted: judge every line first
                    result = self.fold_lines.received(
                        self.db, read.records, read.lines, issues=read.issues, positions=positions
                    )
                else:
                    result = projection.fold(self.db, read.records, issues=read.issues, positions=positions)
            except Exception as exc:  # noqa: BLE001 - the merged files stand; the view catches up from them
                self.view.fell_behind(exc)
                trio.from_thread.run_sync(self.view.kick)
                return stats, []
        return stats, result.applied

    async def inspect_log(self, fn: Callable[[EventLog, dict[str, Position]], T]) -> T:
        """``fn(event_log, stored read positions)`` in a worker thread, while no append,
        fold or merge runs (the lock), so nothing is seen half-written (`thrum doctor`)."""
        async with self.lock:
            positions = await self.read(projection.load_positions)
            return await trio.to_thread.run_sync(fn, self.log, positions)

    def log_files_recreated(self) -> None:
        """The worktree was made again under the log (`lock` held): forget what was cached."""
        self.log.forget_cached_state()

    async def publish(self, applied: list[dict[str, Any]], source: str) -> None:
        if not applied:
            return
        for sub in list(self._subscribers):
            try:
                r = sub(applied, source)
                if r is not None:
                    await r
            except Exception:  # a broken subscriber never breaks the write path
                log.exception("subscriber failed")

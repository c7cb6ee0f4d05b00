"""The view (the SQLite projection) never silently disagrees with the log.

Rules:

1. The log is the truth and the write path's promise is durability: once a batch
   is appended and fsynced it is acknowledged, even when folding it into SQLite
   then fails (disk full, an I/O error, a corrupt page). Read positions move only
   in the fold's own transaction, so a failed fold leaves them before the lines
   it missed; nothing is ever skipped.
2. The view is then *behind*: `health` and `daemon.status` say so (``view``), every
   later write folds by catching up from the stored positions (which takes the
   missed lines too), and `ViewKeeper.run` retries on its own with backoff until it
   has caught up. Events a repair folds are published like any others.
3. A database SQLite reports as corrupt (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``), on a
   read or a fold, is rebuilt from the log into a new file that then replaces it,
   under the writer's lock; the read is retried once. Every repair is logged.
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import peewee as pw
import trio

from ..store import database, projection

if TYPE_CHECKING:
    from .writer import Writer

log = logging.getLogger(__name__)

SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
RETRY_FIRST, RETRY_MAX = 0.5, 8.0  # seconds between repair attempts while behind (writes catch up inline)


def is_corruption(exc: BaseException | None) -> bool:
    """Whether SQLite said the database file itself is damaged (not full, not locked)."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, (sqlite3.DatabaseError, pw.DatabaseError)):
            code = getattr(exc, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB):
                return True
            text = str(exc).lower()
            if "malformed" in text or "not a database" in text:
                return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def describe(exc: BaseException) -> str:
    """The error that started it: SQLite rolls back by itself on some errors (a full
    disk), and the transaction's own rollback then fails with a message that hides the cause."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 5:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for e in chain:
        if "no transaction is active" not in str(e):
            return f"{type(e).__name__}: {e}"
    return f"{type(exc).__name__}: {exc}"


class ViewKeeper:
    """Whether the view is behind the log, and the repairs that bring it back."""

    def __init__(self, writer: Writer, db_path: os.PathLike[str] | str | None):
        self.writer = writer
        self.db_path = Path(db_path) if db_path is not None else None
        self.behind_since: float | None = None
        self.error: str | None = None
        self.repairs = 0
        self.rebuilds = 0
        self.rebuilding = False  # a new projection is being built beside the one served
        self._kick = trio.Event()
        self._retrying = False
        self._rebuilding = trio.Lock()

    @property
    def behind(self) -> bool:
        return self.behind_since is not None

    # ------------------------------------------------------------------ state (any thread)
    def rebuild_ahead(self) -> None:
        """A rebuild is about to start (the daemon's upgrade): say so from now on."""
        self.rebuilding = True

    def fell_behind(self, exc: BaseException) -> None:
        why = describe(exc)
        if self.behind_since is None:
            self.behind_since = time.time()
            log.error(
                "the view is behind the log: folding failed (%s); writes stay durable, "
                "the view is repaired as soon as it can be",
                why,
            )
        self.error = why[:300]

    def caught_up(self) -> None:
        if self.behind_since is not None:
            log.warning("the view has caught up with the log (%.1fs behind)", time.time() - self.behind_since)
            self.repairs += 1
        self.behind_since = None
        self.error = None
        self._retrying = False

    def status(self) -> dict[str, Any]:
        return {
            "state": "behind" if self.behind else "current",
            "behind_since": self.behind_since,
            "error": self.error,
            "repairs": self.repairs,
            "rebuilds": self.rebuilds,
            "rebuilding": self.rebuilding,
        }

    # ------------------------------------------------------------------ repair
    def rebuild_locked(self, reason: str, *, corrupt: bool = True) -> pw.SqliteDatabase:
        """Rebuild the projection from the log into a fresh file and swap it in (worker thread, lock held).
        ``corrupt=False``: the log is judged again (a team fact changed what counts)."""
        if self.db_path is None:
            raise RuntimeError("no database path to rebuild")
        started = time.monotonic()
        if corrupt:
            log.error("the projection database is corrupt (%s): rebuilding it from the log", reason)
        else:
            log.warning("judging the log again (%s): rebuilding the projection from it", reason)
        fresh = self.db_path.with_name(self.db_path.name + ".rebuild")
        _remove(fresh)
        db = database.open_database(fresh)
        self.rebuilding = True  # reads are served from the old file meanwhile
        try:
            result = projection.rebuild(db, self.writer.log, fold_fn=self.writer.fold_lines)
        finally:
            self.rebuilding = False
            db.close()
        try:
            self.writer.db.close()
        except Exception:  # noqa: BLE001 - the old file is being thrown away
            pass
        _remove(self.db_path, keep_main=True)
        os.replace(fresh, self.db_path)
        _remove(fresh)
        swapped = database.open_database(self.db_path)
        self.writer.use_db(swapped)
        self.rebuilds += 1
        log.warning(
            "projection rebuilt from the log in %.1fs (%d malformed, %d refused lines)%s",
            time.monotonic() - started,
            result.malformed,
            result.forged + result.invalid,
            "; the corrupt file is gone" if corrupt else "",
        )
        return swapped

    async def rebuild(self, reason: str, *, corrupt: bool = True) -> None:
        """Rebuild after a corrupt read (or to judge the log again); concurrent callers share one rebuild."""
        generation = self.rebuilds
        async with self._rebuilding:
            if self.rebuilds != generation:
                return  # someone else rebuilt while we waited
            async with self.writer.lock:
                await trio.to_thread.run_sync(
                    lambda: self.rebuild_locked(reason, corrupt=corrupt), abandon_on_cancel=False
                )
        self.caught_up()

    def kick(self) -> None:
        self._kick.set()

    def wake_if_behind(self) -> None:
        """Start the repair loop's retries once the view has fallen behind (event loop only)."""
        if self.behind and not self._retrying:
            self._retrying = True
            self._kick.set()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Retry catching up while the view is behind, with backoff (a kick starts over)."""
        task_status.started()
        delay = RETRY_FIRST
        while True:
            with trio.move_on_after(delay if self.behind else math.inf) as timer:
                await self._kick.wait()
            self._kick = trio.Event()
            if not timer.cancelled_caught:
                delay = RETRY_FIRST
            if not self.behind:
                continue
            try:
                await self.writer.repair()
            except Exception as exc:  # noqa: BLE001 - still behind; say why and try again later
                self.fell_behind(exc)
                delay = min(RETRY_MAX, delay * 2)
            else:
                delay = RETRY_FIRST


def _remove(path: Path, *, keep_main: bool = False) -> None:
    for suffix in ("-wal", "-shm") if keep_main else ("", "-wal", "-shm"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass

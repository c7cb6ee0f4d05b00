"""Stat data for the sync worktree's index, handed to the store in batches (`IndexStats`).

The index only makes ``status`` cheap (`api.GitStore.changed_files`: how a sync without
the daemon's record of appended files finds them). Writing it rewrites every entry: 4 ms
at 11,000 files, in every commit and merge, growing with the history. Entries wait here
and are written at most every `IndexStats.FLUSH_S` seconds, when the daemon stops and
when an offline sync ends; entries lost in a crash cost the next ``status`` one hash per
file touched meanwhile, never a wrong answer (a file whose stat differs is hashed and
compared).
"""

from __future__ import annotations

import os
import threading
import time

from .api import GitStore, Oid

__all__ = ["IndexStats"]


class IndexStats:
    """Entries waiting for ``store``'s index. ``lock`` guards the store (its owner's lock)."""

    FLUSH_S = 30.0

    def __init__(self, store: GitStore, lock: threading.RLock) -> None:
        self.store = store
        self.lock = lock
        self.pending: dict[str, tuple[Oid, os.stat_result]] = {}
        self.flushed = time.monotonic()

    def record(self, files: dict[str, tuple[Oid, os.stat_result]]) -> None:
        """Called with ``lock`` held."""
        self.pending.update(files)
        if time.monotonic() - self.flushed >= self.FLUSH_S:
            self.flush()

    def flush(self, wait: bool = True) -> bool:
        """Write what waits; False when ``wait`` is False and the lock is busy (a cycle runs)."""
        if not self.lock.acquire(blocking=wait):
            return False
        try:
            if self.pending:
                self.store.record_stats(self.pending)
                self.pending = {}
            self.flushed = time.monotonic()
            return True
        finally:
            self.lock.release()

"""The log as the writer lends it to one sync cycle (`thrum.sync.logaccess.LogAccess`)."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any

from .writer import Writer


class WriterLog:
    """The log as the writer lends it to one sync cycle (`thrum.sync.logaccess.LogAccess`).

    Applied events are collected in ``applied`` (published when the cycle ends). Until a
    cycle has asked git once since the daemon started (``scanned``), the files to commit
    are "unknown": appends a crash left uncommitted are found by git's status.
    """

    def __init__(self, writer: Writer, applied: list[dict[str, Any]], *, scanned: bool):
        self._writer = writer
        self._applied = applied
        self._scanned = scanned
        self.taken_at: int | None = None  # events the writer had written when the files were last taken

    def locked(self) -> AbstractContextManager[object]:
        return self._writer.locked_from_thread()

    def appended(self) -> list[str] | None:
        taken = self._writer.take_appended()
        self.taken_at = self._writer.events_written  # the lock is held: every event written so far is taken
        if not self._scanned:
            self._scanned = True
            return None
        return taken

    def not_committed(self, paths: list[str]) -> None:
        self._writer.give_back_appended(paths)

    def nothing_appended(self) -> bool:
        # read without the lock (a hint: see `LogAccess.nothing_appended`); an append marks
        # its files and leaves its seal waiting in one step of the writer's
        return self._scanned and not self._writer.dirty_shards

    def read(self, path: str) -> tuple[bytes, os.stat_result] | None:
        return self._writer.read_log_file(path)

    def apply_remote(self, writes: list[tuple[str, bytes]], received: dict[str, list[bytes]]) -> list[os.stat_result]:
        stats, applied = self._writer.apply_remote(writes, received)
        self._applied.extend(applied)
        return stats

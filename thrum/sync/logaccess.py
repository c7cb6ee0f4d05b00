"""What a sync cycle needs from whoever owns the log's files, and the owner without a daemon.

The sync never opens the log's files on its own while a daemon runs: the daemon's
writer owns them and the lock that keeps appends out (`thrum.daemon.writer`), and it
offers a cycle what `LogAccess` lists. The store and the sync never import each
other: the daemon's side implements this protocol with the store's log, and the
offline cycle (``thrum sync`` with the daemon stopped, holding its flock) with
`PlainLog`, which folds nothing (the next daemon catches up from the files).

Rules a cycle keeps:

1. `locked` is held to read the files to commit (`appended`, `read`) and for each
   chunk of a merge (`read`, `apply_remote`), never across network calls.
2. `appended` hands over the files appended to since the last commit, once (None:
   unknown, ask git); `not_committed` gives them back when the commit failed.
3. `apply_remote` puts one chunk's merged files in place and takes in the lines they
   brought, before the lock is let go: a send never sees a merged file whose lines
   the view does not hold yet.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from thrum import durable, nofollow

__all__ = ["LogAccess", "PlainLog"]

FileRead = tuple[bytes, os.stat_result]


class LogAccess(Protocol):
    """The log's files as a cycle sees them (see the module rules)."""

    def locked(self) -> AbstractContextManager[object]:
        """Keep appends out (rule 1)."""
        ...

    def appended(self) -> list[str] | None:
        """Take the files appended to since the last commit (None: unknown); under `locked`."""
        ...

    def not_committed(self, paths: list[str]) -> None:
        """Give back what `appended` handed over, for the next commit; under `locked`."""
        ...

    def nothing_appended(self) -> bool:
        """A hint, without the lock: True only when nothing was appended since the last
        `appended` (then a cycle with nothing to send skips its first commit, and its lock;
        what is appended after the answer goes with the cycle's commit after its merge)."""
        ...

    def read(self, path: str) -> FileRead | None:
        """A log file and its stat, never through a link (None: no such file).

        Raises:
            OSError: a link, a FIFO or a directory in its place.
        """
        ...

    def apply_remote(self, writes: list[tuple[str, bytes]], received: dict[str, list[bytes]]) -> list[os.stat_result]:
        """Replace ``writes`` (merged files) and take in ``received`` (the lines new here,
        per file); the stat of each file written, in order. Under `locked` (rule 3)."""
        ...


class PlainLog:
    """`LogAccess` over the files alone: no daemon, nothing folded, a plain thread lock.

    `note_appended` names files appended to (tests, tools); without it, `appended`
    says "unknown" and the commit asks git which files changed.
    """

    def __init__(self, root: os.PathLike[str] | str):
        self.root = Path(root)
        self._lock = threading.Lock()
        self._noted: list[str] | None = None

    def locked(self) -> AbstractContextManager[object]:
        return self._lock

    def note_appended(self, paths: Iterable[str]) -> None:
        self._noted = sorted(set(self._noted or []) | set(paths))

    def appended(self) -> list[str] | None:
        noted, self._noted = self._noted, None
        return noted

    def not_committed(self, paths: list[str]) -> None:
        if paths:
            self.note_appended(paths)

    def nothing_appended(self) -> bool:
        return False  # unknown until `appended` asks git (or `note_appended` named them)

    def read(self, path: str) -> FileRead | None:
        return nofollow.read_regular(self.root, path, drop_links=True)

    def apply_remote(self, writes: list[tuple[str, bytes]], received: dict[str, list[bytes]]) -> list[os.stat_result]:
        return durable.write_batch(self.root, writes) if writes else []

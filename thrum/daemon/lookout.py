"""What the remote lacks and whether it moved: the sync loop's cheap questions between cycles.

Rules:

1. Events waiting to be pushed are counted from the log (not from memory: issue 30,
   item 6): at start-up and after each cycle that did not leave the remote holding our
   tip, with the writer's count of events written at that time; between counts, what
   was written since is added. After a cycle that left the remote holding our tip,
   nothing written before its commit took the files is missing there (`cycle_ended`): no count, which asks
   git for the status of every file of the worktree (70 % of a no-op sync on the
   million-event history). Without a remote, it is what was written since the last
   cycle that ended well.
2. A timer's look (`thrum.daemon.pace`) asks only for the remote's tip (one ref
   advertisement) and compares it with the tip the last fetch saw; the sync loop runs
   a full cycle only when they differ, something waits to be pushed, or the last cycle
   failed.

Both questions run in the cycle's worker thread (git and the log's files).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..sync.gate import CycleGate

if TYPE_CHECKING:
    from ..sync.logaccess import LogAccess
    from ..sync.remoteview import RemoteView
    from ..sync.replicate import Replicator
    from ..sync.transport.credentials import Credentials
    from .writer import Writer

log = logging.getLogger(__name__)


class Lookout:
    def __init__(self, writer: Writer):
        self._writer = writer
        self.view: RemoteView | None = None  # the remote's tip and what it lacks, between cycles
        self._base: tuple[int, int] | None = None  # (count from the log, events written then)
        self.pushed_mark = 0  # events written when the last cycle ended well (no remote: rule 1)
        self.tip_checks = 0

    def watch(self, view: RemoteView) -> None:
        """The remote's view of a new replicator (the worktree may be made again)."""
        self.view = view

    def count(self, files: LogAccess, remote: bool) -> None:
        """Count from the log what the remote lacks (worker thread; rule 1)."""
        if not remote or self.view is None:
            return
        written = self._writer.events_written
        try:
            count = self.view.pending(files)
        except Exception:  # noqa: BLE001 - a count is for reports; the next cycle counts again
            log.exception("could not count the events the remote lacks")
            return
        self._base = (count, written)

    def cycle_ended(self, ok: bool, pushed: bool, remote: bool, taken_at: int) -> bool:
        """A cycle ended (``ok``: well; ``pushed``: the remote holds our tip; its commit took
        the files when ``taken_at`` events were written). True when what the remote lacks
        is known without a count (rule 1: only what was written since)."""
        if ok and (pushed or not remote):
            self.pushed_mark = taken_at  # without a remote: committed
        if ok and pushed and remote:
            self._base = (0, taken_at)
            return True
        return False

    def pending(self, remote: bool) -> int:
        """Events the remote lacks: the last count from the log, plus what was written since."""
        written = self._writer.events_written
        if remote and self._base is not None:
            count, at = self._base
            return count + max(0, written - at)
        return max(0, written - self.pushed_mark)

    def moved(self, replicator: Replicator, gate: CycleGate, credentials: Credentials) -> bool:
        """Whether the remote's tip differs from the one the last fetch saw (worker thread;
        rule 2), looked at with ``credentials`` through the replicator's network gate."""
        assert self.view is not None
        with gate.held():
            tip = self.view.tip(credentials, replicator.network)
            known = self.view.known_tip()
        return bool(tip != known)

    def looked(self) -> None:
        """A look finished (``sync status`` counts them)."""
        self.tip_checks += 1

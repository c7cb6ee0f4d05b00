"""The timer that applies lines held for being dated ahead, once their time comes.

A line dated more than the allowed clock skew ahead of this replica waits in the
projection (`thrum.store.held`); any later fold applies the ones whose time has come,
but a quiet replica may fold nothing for hours, so this task wakes at the earliest
held line's time (at least every ``clock_skew`` seconds, at most every `MAX_WAIT_S`)
and folds them under the writer's lock, publishing what they change like a sync.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from ..store.verified import VerifiedFold
    from .writer import Writer

log = logging.getLogger(__name__)

MAX_WAIT_S = 60.0


class HeldTimer:
    def __init__(self, writer: Writer, fold: VerifiedFold, skew_s: float):
        self.writer = writer
        self.fold = fold
        self.longest = max(0.05, min(MAX_WAIT_S, skew_s))

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            due: float | None = await self.writer.read(self.fold.next_due)
            wait = self.longest if due is None else min(self.longest, max(0.0, due - time.time()))
            await trio.sleep(wait)
            if due is not None and due <= time.time():
                await self._release()

    async def _release(self) -> None:
        try:
            applied = await self.writer.release_due()  # published like a sync's
        except Exception:  # noqa: BLE001 - the lines stay held; the next round or fold tries again
            log.exception("could not apply the lines whose time has come")
            return
        if applied:
            log.info("applied %d event(s) held until their time", len(applied))

"""What a starting daemon tells the process that started it, through the ready pipe (`lifecycle.start`).

One JSON line per message: ``{"progress": ...}`` while a start-up rebuild runs (as
many as it reports; the starter's wait restarts with each), then exactly one of
``{"pid": N}`` (listening), ``{"error": ...}`` or ``{"error": ..., "already_running":
true}``. Without a pipe (``thrum daemon run``) nothing is sent.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

log = logging.getLogger(__name__)

SLOW_REBUILD_S = 1.0  # a start-up rebuild that took longer is logged (a new repository's takes milliseconds)


def tell_starter(ready_fd: int | None, message: dict[str, Any], *, close: bool = False) -> None:
    """One JSON line to the process waiting for this daemon to start."""
    if ready_fd is not None:
        try:
            os.write(ready_fd, json.dumps(message).encode() + b"\n")
            if close:
                os.close(ready_fd)
        except OSError:
            pass


class RebuildReports:
    """A `projection.Progress` for the start-up rebuild: each report to the starter (when
    there is one), and a slow rebuild's summary to the daemon's log."""

    def __init__(self, ready_fd: int | None):
        self.ready_fd = ready_fd

    def __call__(self, phase: str, events: int, done_bytes: int, total_bytes: int, elapsed: float) -> None:
        report = {"phase": phase, "events": events, "bytes": done_bytes, "total_bytes": total_bytes}
        tell_starter(self.ready_fd, {"progress": {**report, "elapsed": round(elapsed, 3)}})
        if phase == "done" and elapsed >= SLOW_REBUILD_S:
            log.info("projection built from the log: %d events in %.1fs", events, elapsed)

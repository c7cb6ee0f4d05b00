"""How far ``thrum init`` on a large history is, on the terminal: fetch, checkout, first rebuild.

Attaching to a long history fetches it, writes its log files into the ``a-sync``
worktree, and starts a daemon that folds all of it before it listens; that can take a
while, and silence looks like a hang. `lifecycle.init_repo` hands the fetch's and the
checkout's reports (`thrum.sync.worktree.ensure_sync_worktree`), and `lifecycle.start`
each of the daemon's (`thrum.store.rebuild.Progress`), to a `RebuildProgress`, which
keeps one line on stderr up to date: the files checked out, then events read, the
rate, and an estimate of the time left (from the bytes of the log read so far, and the
index steps that follow the load).
Only on a terminal, and never under ``--quiet`` or ``--json``: scripts and logs
get no carriage returns.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


# The finishing steps (query and search indexes, counters) take about half as long as the
# load before them (issue 29: ~23 s of CPU after ~45 s at a million events): the time left
# counts them, or it would say "0 s" for the last third of the wait.
FINISHING = 0.5


def rebuild_progress(opts: Any, stream: TextIO | None = None) -> RebuildProgress | None:
    """The display for ``lifecycle.start(on_progress=...)``, or None where it must stay quiet."""
    stream = stream if stream is not None else sys.stderr
    if opts.quiet or opts.json or not stream.isatty():
        return None
    return RebuildProgress(stream)


class RebuildProgress:
    """One status line, rewritten in place with each report; a last line once it is done."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.open = False  # a line is shown that no newline ended yet

    def __call__(self, report: dict[str, Any]) -> None:
        text = describe(report)
        if text is None:
            return
        done = report.get("phase") == "done"
        self.stream.write("\r\x1b[K" + text + ("\n" if done else ""))
        self.stream.flush()
        self.open = not done

    def finish(self) -> None:
        """Clear a line left open (a checkout with no rebuild after it): what is printed next starts clean."""
        if self.open:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.open = False


def describe(report: dict[str, Any]) -> str | None:
    """The line for one report (None for a report it cannot read: the daemon is not trusted to be current)."""
    try:
        phase = str(report["phase"])
        if phase == "fetch":
            return f"thrum: fetching the team's log from {str(report['remote'])[:80]}…"
        if phase == "checkout":
            files, done = int(report["files"]), int(report["done"])
            return f"thrum: checking out the log: {min(done, files):,} of {files:,} files"
        events = int(report["events"])
        elapsed = max(float(report["elapsed"]), 1e-6)
        done_bytes = int(report.get("bytes", 0))
        total_bytes = int(report.get("total_bytes", 0))
    except (KeyError, TypeError, ValueError):
        return None
    rate = f"{events / elapsed:,.0f} events/s"
    if phase == "load":
        line = f"thrum: building the projection: {events:,} events"
        if total_bytes > 0 and done_bytes > 0:
            share = min(done_bytes / total_bytes, 1.0)
            load = elapsed / share  # the whole load at this pace, then the indexes
            left = load * (1 - share) + load * FINISHING
            line += f" ({share:.0%}), {rate}, about {_duration(left)} left"
        else:
            line += f", {rate}"
        return line
    if phase == "indexes":  # (told again every few seconds while they are built)
        return f"thrum: building the projection: {events:,} events read; building its indexes ({_duration(elapsed)} in)"
    if phase == "done":
        return f"thrum: projection built: {events:,} events in {_duration(elapsed)} ({rate})"
    return None


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"

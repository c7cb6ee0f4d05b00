"""One sync cycle over a `Replicator`: fetch, merge, commit, push, until the push lands.

Rules:

1. The merge comes before the commit: it takes the worktree's files as they are
   (appends not committed yet included), so when only the remote moved, our branch
   fast-forwards and our appends are committed on top of the remote's tip; no local
   commit is left behind by a merge for the object store to keep. When the fetch
   fails, the appends are still committed locally.
2. The writer lock (``locked``) is held only to read the files to commit and for each
   bounded chunk of a merge, never across network calls.
3. A push that lost a race makes the cycle fetch, merge and push again, a bounded
   number of times with jittered exponential backoff (replicas that lost the same
   race spread out).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import SyncError
from .treemerge import MergeOutcome

if TYPE_CHECKING:
    from .replicate import Paths, Replicator

__all__ = ["SyncReport", "run_cycle"]

log = logging.getLogger(__name__)
SLOW_S = 0.5  # a cycle slower than this logs where its time went


@dataclass
class SyncReport:
    """One sync cycle. ``pushed``: the remote holds our tip at the end of the cycle."""

    sent: int = 0
    received: int = 0
    commits: int = 0
    pushed: bool = False
    duration_s: float = 0.0
    received_lines: dict[str, list[bytes]] = field(default_factory=dict)
    remote: str | None = None
    remote_url: str | None = None
    attempts: int = 0
    error: str | None = None  # set when the push kept losing races
    ignored: dict[str, int] = field(default_factory=dict)  # entries of a-sync thrum ignores, by reason
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step: fetch, merge, fold, commit, push


def run_cycle(
    replicator: "Replicator",
    locked: Callable[[], AbstractContextManager],
    max_attempts: int = 24,
    backoff_s: float = 0.05,
    on_received: Callable[[MergeOutcome], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    paths: "Paths" = None,
) -> SyncReport:
    """One sync: fetch, merge, commit what was appended, push; again until the push lands.

    ``locked()`` returns a context manager that keeps the appender out; it is held
    while the files to commit are read and for each chunk of a merge, never across
    network calls. ``on_received`` runs inside each locked merge chunk that wrote
    files or brought new lines, so the caller can fold them before appends resume.
    ``paths`` names the files appended to since the last commit (None: ask git; see
    :meth:`Replicator.commit_pending`). Runs in a worker thread: it blocks.

    Raises:
        AuthError, RemoteUnreachable, PushRejected: see :class:`Replicator`; the
        local commit has been made by then.
    """
    start = time.monotonic()
    report = SyncReport()
    phases = report.phases

    def timed(name: str, fn, *args):
        t = time.monotonic()
        try:
            return fn(*args)
        finally:
            phases[name] = phases.get(name, 0.0) + time.monotonic() - t

    def folding(outcome: MergeOutcome) -> None:
        if on_received is not None:
            timed("fold", on_received, outcome)

    if not replicator.has_remote():
        report.commits += int(replicator.commit_pending(paths, locked))
        report.ignored = replicator.ignored_paths()
        report.duration_s = time.monotonic() - start
        return report
    report.remote = replicator.remote_name
    for attempt in range(1, max_attempts + 1):
        report.attempts = attempt
        try:
            tip = timed("fetch", replicator.fetch)
        except SyncError:
            report.commits += int(replicator.commit_pending(paths, locked))
            raise
        report.remote_url = replicator.last_fetch.url if replicator.last_fetch else None
        outcome = timed("merge", replicator.merge, tip, locked, folding)
        report.received += outcome.received
        for path, lines in outcome.received_lines.items():
            report.received_lines.setdefault(path, []).extend(lines)
        report.commits += outcome.commits + int(timed("commit", replicator.commit_pending, paths, locked))
        report.sent = replicator.ahead_of(tip)
        if timed("push", replicator.push):
            report.pushed = True
            break
        if attempt < max_attempts:
            sleep(_backoff(backoff_s, attempt))
    else:
        report.error = (
            f"push to {report.remote} was rejected {max_attempts} times "
            f"because others kept pushing; the next sync retries"
        )
    report.ignored = replicator.ignored_paths()
    report.duration_s = time.monotonic() - start
    if "merge" in phases and "fold" in phases:
        phases["merge"] -= phases["fold"]  # the fold runs inside the merge's chunks
    if report.duration_s > SLOW_S:
        log.info(
            "sync took %.2fs (%s; %d received, %d sent)",
            report.duration_s,
            ", ".join(f"{k} {v:.2f}s" for k, v in phases.items()),
            report.received,
            report.sent,
        )
    return report


BACKOFF_CAP_S = 2.0


def _backoff(base_s: float, attempt: int) -> float:
    """Exponential backoff with jitter, so replicas that lost the same race spread out."""
    return min(BACKOFF_CAP_S, base_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)

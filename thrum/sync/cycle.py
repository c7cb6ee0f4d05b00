"""One sync cycle over a `Replicator`: fetch, merge, commit, push, until the push lands.

Rules:

1. The merge comes before the commit: it takes the worktree's files as they are
   (appends not committed yet included), so when only the remote moved, our branch
   fast-forwards and our appends are committed on top of the remote's tip; no local
   commit is left behind by a merge for the object store to keep. When the fetch
   fails, the appends are still committed locally.
2. The log's lock (`LogAccess.locked`) is held only to read the files to commit and
   for each bounded chunk of a merge, never across network calls.
3. A push that lost a race makes the cycle fetch, merge and push again, a bounded
   number of times with jittered exponential backoff (replicas that lost the same
   race spread out).
4. Without a remote (none configured, or local-only mode) a cycle only commits: the
   one place that rule lives, for the daemon and the offline cycle alike.
5. Push first (issue 30, conversations at seconds): when our branch only adds to the
   remote's tip as we last saw it and there is something to send, the appends are
   committed and pushed with no fetch before, and only onto that very tip
   (`Replicator.push` with ``onto``: libgit2 stops before sending anything when the
   remote's branch is elsewhere). A sender's cycle is then one ref advertisement and
   one upload instead of two advertisements and an upload. When the remote moved (the
   other side wrote too, or someone rewound it: the fetch's rollback check then runs),
   the cycle goes on as rule 1 says; the commit made for the push stays behind in the
   object store, unreferenced.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import SyncError
from .logaccess import LogAccess
from .replicate import Replicator
from .rollback import rolled_back
from .transport.credentials import Credentials

__all__ = ["SyncReport", "run_cycle"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")
SLOW_S = 0.5  # a cycle slower than this logs where its time went


@dataclass
class SyncReport:
    """One sync cycle. ``pushed``: the remote holds our tip at the end of the cycle."""

    sent: int = 0
    received: int = 0
    commits: int = 0
    pushed: bool = False
    duration_s: float = 0.0
    remote: str | None = None
    remote_url: str | None = None
    attempts: int = 0
    error: str | None = None  # set when the push kept losing races
    ignored: dict[str, int] = field(default_factory=dict)  # entries of a-sync thrum ignores, by reason
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step: fetch, merge, fold, commit, push
    rolled_back: dict[str, Any] | None = None  # lines the remote lost of what this replica pushed (sync.rollback)


def run_cycle(
    replicator: Replicator,
    files: LogAccess,
    *,
    remote: bool = True,
    max_attempts: int = 24,
    backoff_s: float = 0.05,
    sleep: Callable[[float], None] = time.sleep,
    credentials: Credentials | None = None,
) -> SyncReport:
    """One sync: fetch, merge, commit what was appended, push; again until the push lands.

    ``files`` is the log as its owner lends it (`LogAccess`): its lock is held while
    the files to commit are read and for each chunk of a merge, never across network
    calls, and each chunk's merged files and received lines go to its owner before
    the lock is let go. ``remote=False`` (local-only mode), or no remote configured:
    only a commit (rule 4). ``credentials``: this cycle's login for every fetch and
    push (None: the replicator's own). Runs in a worker thread: it blocks.

    Raises:
        AuthError, RemoteUnreachable, PushRejected: see :class:`Replicator`; the
        local commit has been made by then.
    """
    start = time.monotonic()
    report = SyncReport()
    phases = report.phases

    def timed(name: str, fn: Callable[..., _T], *args: object) -> _T:
        t = time.monotonic()
        try:
            return fn(*args)
        finally:
            phases[name] = phases.get(name, 0.0) + time.monotonic() - t

    if not remote or not replicator.has_remote():
        report.commits += int(replicator.commit_pending(files))
        report.ignored = replicator.ignored_paths() or {}
        report.duration_s = time.monotonic() - start
        return report
    timed_files = _TimedFold(files, phases)
    report.remote = replicator.remote_name
    first = _push_first(replicator, files, report, timed, credentials)  # None: not tried; else whether it landed
    if first:
        max_attempts = 0  # done: the loop below does not run
    for attempt in range(1, max_attempts + 1):
        report.attempts = attempt + (first is False)  # a push-first that lost counts as the first attempt
        try:
            tip = timed("fetch", replicator.fetch, credentials)
            report.remote_url = replicator.last_fetch.url if replicator.last_fetch else None
            if report.rolled_back is None:  # what the remote lost of the tip we pushed (before the merge)
                report.rolled_back = rolled_back(replicator.store, replicator.trees, tip)
            outcome = timed("merge", replicator.merge, tip, timed_files)
        except SyncError:  # an unreachable remote, a refused tip: our appends are committed all the same
            report.commits += int(replicator.commit_pending(files))
            raise
        report.received += outcome.received
        report.commits += outcome.commits + int(timed("commit", replicator.commit_pending, files))
        report.sent = replicator.ahead_of(tip, files)
        if timed("push", replicator.push, None, credentials):
            report.pushed = True
            break
        if attempt < max_attempts:
            sleep(_backoff(backoff_s, attempt))
    else:
        if max_attempts:
            report.error = (
                f"push to {report.remote} was rejected {max_attempts} times "
                f"because others kept pushing; the next sync retries"
            )
    report.ignored = replicator.ignored_paths() or {}
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


def _push_first(
    replicator: Replicator,
    files: LogAccess,
    report: SyncReport,
    timed: Callable[..., Any],
    credentials: Credentials | None,
) -> bool | None:
    """Rule 5: commit and push onto the remote's tip as we know it, when our branch only
    adds to it. None: not tried (nothing to send, or the branch is not ahead of what we
    know); True: the push landed and the cycle is done; False: the remote moved."""
    known = replicator.known_tip_we_extend()
    if known is None:
        return None
    if files.nothing_appended() and replicator.head_id() == known:
        return None  # nothing to send: no commit (nor lock) here; the commit after the merge takes what comes
    report.commits += int(timed("commit", replicator.commit_pending, files))
    if replicator.head_id() == known:
        return None  # nothing of ours to send: fetch, as rule 1 says
    sent = replicator.ahead_of(known, files)
    report.attempts = 1
    if not timed("push", replicator.push, known, credentials):
        return False
    report.sent, report.pushed = sent, True
    report.remote_url = replicator.last_fetch.url if replicator.last_fetch else None
    return True


class _TimedFold:
    """``files`` with the time its owner spends taking in each merged chunk counted as "fold"."""

    def __init__(self, files: LogAccess, phases: dict[str, float]):
        self._files = files
        self._phases = phases
        self.locked = files.locked
        self.appended = files.appended
        self.not_committed = files.not_committed
        self.nothing_appended = files.nothing_appended
        self.read = files.read

    def apply_remote(self, writes: list[tuple[str, bytes]], received: dict[str, list[bytes]]) -> list[os.stat_result]:
        t = time.monotonic()
        try:
            return self._files.apply_remote(writes, received)
        finally:
            self._phases["fold"] = self._phases.get("fold", 0.0) + time.monotonic() - t


BACKOFF_CAP_S = 2.0


def _backoff(base_s: float, attempt: int) -> float:
    """Exponential backoff with jitter, so replicas that lost the same race spread out."""
    return float(min(BACKOFF_CAP_S, base_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5))

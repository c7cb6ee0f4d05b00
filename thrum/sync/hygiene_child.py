"""Consolidate an object store in a child process, so its memory goes with the child.

Packing and rolling up read every object of the packs involved through libgit2, and
the inflated objects and delta bases pass through the allocator of the thread that
reads them. glibc keeps that high-water mark in the thread's arena: in a daemon that
consolidated in one of its threads, the storage benchmark's daemons grew from 60 to
580 MiB over 50,000 events, in step with the store. A child process returns it all
when it exits. The daemon asks `hygiene.has_work` first (a directory listing), so a
child starts only when there is something to do, about once in 25 syncs.

The child lowers its own CPU priority (`NICENESS`): it is housekeeping, and on a small
machine it would otherwise take a core from the syncs and queries running beside it,
more so as the packs it rolls up grow.

Usage (the daemon runs it): ``python -m thrum.sync.hygiene_child GIT_DIR [TRIGGER]``; prints
what it did as one JSON object.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import asdict

from . import hygiene

log = logging.getLogger(__name__)

__all__ = ["consolidate_in_child"]

TIMEOUT_S = 1800.0  # a store large enough to take longer is consolidated on the next round
NICENESS = 10  # added to the child's nice value: the daemon's own work comes first


def consolidate_in_child(
    git_dir: os.PathLike | str, *, loose_trigger: int = hygiene.LOOSE_TRIGGER, timeout: float = TIMEOUT_S
) -> hygiene.Consolidation:
    """`hygiene.consolidate` in a child process when there is work; blocks until it ends."""
    if not hygiene.has_work(git_dir, loose_trigger=loose_trigger):
        return hygiene.Consolidation()
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__, os.fspath(git_dir), str(loose_trigger)],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        log.warning("consolidating %s took longer than %.0fs; the next round goes on", git_dir, timeout)
        return hygiene.Consolidation(skipped=f"took longer than {timeout:.0f}s; the next round goes on")
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        log.warning("could not consolidate %s: the child process failed: %s", git_dir, tail[0])
        return hygiene.Consolidation(skipped=f"the consolidating process failed: {tail[0]}")
    report = hygiene.Consolidation(**json.loads(done.stdout))
    if report.declined_loose:
        hygiene.note_declined(git_dir, report.declined_loose)
    hygiene.log_result(git_dir, report)
    return report


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or not (len(argv) == 1 or argv[1].isdigit()):
        print("usage: python -m thrum.sync.hygiene_child GIT_DIR [LOOSE_TRIGGER]", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    try:
        os.nice(NICENESS)
    except (AttributeError, OSError):  # no nice on this platform: run as we are
        pass
    trigger = int(argv[1]) if len(argv) == 2 else hygiene.LOOSE_TRIGGER
    print(json.dumps(asdict(hygiene.consolidate(argv[0], loose_trigger=trigger))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

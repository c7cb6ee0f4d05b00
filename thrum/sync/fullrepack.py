"""A full repack due after an offline sync, run by a child the sync leaves behind.

A full repack (`maintenance` rule 4) of a large store takes minutes: run inline, a
`thrum sync` from cron took 130 s instead of 0.4 s on a 1,000,000-event history, and
held the offline sync's locks (no daemon could start) the whole time. So the offline
cycle starts this module's `main` as a child once its locks are released and returns
(git's ``gc.autoDetach``); ``THRUM_TIDY_DETACH=0`` (or ``"tidy_detach": false`` in the
config) runs it inline instead (docs/design/decisions.md, "An offline sync's full
repack runs detached").

What the child is given is the stores to repack whole, nothing more: it makes each
command itself, under the store's lock (`maintenance.Tidier.run` takes it and decides
again: a daemon or another offline sync may have repacked the store meanwhile), so no
serialized command can be stale and two repacks of one store never run at once (rule
5). It stays in the caller's session, in a process group of its own: rule 2 (a niced
repack yields only inside its own session, and in one of its own it would take an
equal share of the CPU beside the user's work) while a terminal's Ctrl-C or hangup,
which reach the foreground group, do not end it. Its stdout and stderr are the
daemon's log (``.thrum/var/daemon.log``), where the daemon's own repacks say what
they did and where ``thrum daemon`` errors point: a failure there never touches the sync.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)


def detach(own: Path, private: Path, stores: Sequence[Path], log_file: Path) -> int | None:
    """Start the child that repacks ``stores`` whole (their ``objects`` directories) and
    return its pid without waiting; None when it could not start (logged: the sync is done)."""
    argv = [sys.executable, "-m", __name__, "--own", str(own), "--private", str(private), *map(str, stores)]
    try:
        out = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.warning("cannot open %s for the full repack's log: %s; repacking later", log_file, exc)
        return None
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            close_fds=True,  # never the sync's locks: a daemon may start while it runs
            process_group=0,
        )
    except OSError as exc:
        log.warning("cannot start the full repack of %s: %s", ", ".join(map(str, stores)), exc)
        return None
    finally:
        os.close(out)
    return child.pid


def running_children() -> list[int]:
    """This process's children that are still repacking (`detach`; a zombie has no command
    line): what a caller that ran the offline sync in its own process (a benchmark, a test)
    waits for before it measures or deletes the stores."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and __name__.encode() in cmdline:
            found.append(int(entry.name))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the terminal it was started from may close
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("--own", type=Path, required=True)
    parser.add_argument("--private", type=Path, required=True)
    parser.add_argument("stores", type=Path, nargs="+")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("THRUM_LOG_LEVEL", "INFO").upper(),
        format=f"%(asctime)s %(levelname)s %(name)s[{os.getpid()}]: %(message)s",
        stream=sys.stderr,
    )
    from .maintenance import Tidier

    tidier = Tidier(args.own, args.private)
    failed = 0
    for objects in args.stores:
        try:
            own = objects == args.own / "objects"  # else a path remote's, looked at by the sync (rule 3)
            repack = tidier.own_repack(full=True) if own else tidier.remote_repack(objects.parent, full=True)
            failed += tidier.run(repack) is not None  # made again under the store's lock (rule 5)
        except Exception:  # noqa: BLE001 - said in the log; the next store still gets its turn
            log.exception("the full repack of %s failed", objects)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

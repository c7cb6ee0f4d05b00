"""The daemon as a process: one per repository, told apart by a flock, and the entry point.

Rules:

1. A second daemon of the same repository stops at the flock (`AlreadyRunning`), and
   says which pid holds it. The *starting* lock is held from then until the socket
   listens: a starter that found this daemon already running waits on it
   (`lifecycle.start`) instead of connecting too early.
2. The pid file names the running daemon; it is removed at exit only while it still
   names this process (a newer daemon may have replaced it).
3. Before the store opens: the soft descriptor limit goes up to the hard one (the
   connection cap is fitted under it), glibc maps large buffers on their own pages
   (so a closed big request gives its memory back) and shares two arenas between all
   threads, and libgit2's process-wide object cache is capped (docs/design/decisions.md,
   "The daemon's memory by owner").
4. `main` reports to the process that started it through the ready pipe exactly once
   per outcome (`thrum.daemon.starter`): listening, already running, or the error.
"""

from __future__ import annotations

import fcntl
import gc
import logging
import os
import sys

import trio

from .. import errors
from ..paths import ThrumPaths
from ..sync.gitstore.gitlib import bound_object_cache
from .limits import raise_descriptor_limit, tune_allocator
from .starter import RebuildReports, tell_starter

log = logging.getLogger(__name__)


class AlreadyRunning(errors.ThrumError):
    pass


class ProcessFiles:
    """The flock, the starting lock and the pid file of one running daemon."""

    def __init__(self, paths: ThrumPaths):
        self._paths = paths
        self._lock_fd: int | None = None
        self._starting_fd: int | None = None

    def take_lock(self) -> None:
        """Raises: AlreadyRunning: another daemon of this repository holds the flock."""
        self._paths.var.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._paths.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = self._paths.recorded_pid()
            raise AlreadyRunning(f"thrum daemon is already running (pid {pid})") from None
        self._lock_fd = fd
        starting = os.open(self._paths.starting_lock, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(starting, fcntl.LOCK_EX)
        self._starting_fd = starting

    def write_pid(self) -> None:
        tmp = self._paths.pid_file.with_suffix(".tmp")
        tmp.write_text(f"{os.getpid()}\n")
        os.replace(tmp, self._paths.pid_file)

    def listening(self) -> None:
        """The socket listens: release the starting lock (rule 1)."""
        fd, self._starting_fd = self._starting_fd, None
        if fd is not None:
            os.close(fd)

    def release(self) -> None:
        """At exit: the pid and port files (while they are ours), then the locks."""
        for p in (self._paths.pid_file, self._paths.ws_port_file):
            try:
                if p == self._paths.pid_file and self._paths.recorded_pid() != os.getpid():
                    continue
                p.unlink()
            except FileNotFoundError:
                pass
        self.listening()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def tune_process() -> int:
    """Rule 3; returns the soft descriptor limit now in force."""
    descriptors = raise_descriptor_limit()
    tune_allocator()
    bound_object_cache()
    return descriptors


def setup_logging(paths: ThrumPaths, *, foreground: bool) -> None:
    paths.var.mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = [logging.FileHandler(paths.log_file)]
    if foreground:
        handlers.append(logging.StreamHandler())
    logging.basicConfig(
        level=os.environ.get("THRUM_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )


def main(paths: ThrumPaths, *, ready_fd: int | None = None, foreground: bool = False) -> int:
    """Run the daemon until it stops; the exit status (0, 1: failed, 3: already running)."""
    from ..ownership import UntrustedState, require_own_state
    from .server import Daemon

    # What the imports made lives until exit: out of the cycle collector's full scans from
    # here on, including the two the interpreter runs at exit (~45 ms of CPU a stop).
    # Frozen before anything is opened, so connections and files are still collected and
    # closed at exit (docs/design/decisions.md, "A process's imports are frozen").
    gc.freeze()
    try:  # before anything is read from (or logged into) .thrum/
        require_own_state(paths)
    except UntrustedState as exc:
        tell_starter(ready_fd, {"error": exc.message})
        print(f"thrum: {exc.message}", file=sys.stderr, flush=True)
        return 1
    setup_logging(paths, foreground=foreground)

    report: dict[str, object] | None = None
    status = 0
    try:
        daemon = Daemon(paths)  # reads the config: a bad one is reported like any start-up error

        async def serve() -> None:
            await daemon.run(
                ready=lambda: tell_starter(ready_fd, {"pid": os.getpid()}, close=True),
                progress=RebuildReports(ready_fd),
            )

        trio.run(serve)
    except AlreadyRunning as exc:
        log.info("%s", exc.message)
        report, status = {"error": exc.message, "already_running": True}, 3
        if ready_fd is None:
            print(f"thrum: {exc.message}", flush=True)
    except errors.ThrumError as exc:
        log.error("%s", exc.message)
        report, status = {"error": exc.message}, 1
    except Exception as exc:
        log.exception("daemon crashed")
        report, status = {"error": f"daemon failed: {exc}"}, 1
    if report is not None:
        tell_starter(ready_fd, report)
    return status

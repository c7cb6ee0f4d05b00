"""Setting up thrum and starting its daemon for the mail provider, safely from many processes at once.

Gas City may run many provider processes at the same moment, each finding no
daemon. `thrum.lifecycle` already lets only one daemon run; these locks add that
the others wait until that one answers instead of failing in the gap between
"a daemon holds the lock" and "it listens", and that one process, not twenty,
sets up an uninitialised repository. Imported only when the daemon does not answer.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .. import errors, lifecycle
from ..paths import ThrumPaths, resolve


@contextmanager
def locked(path: Path, *, directory: bool = False) -> Iterator[None]:
    """An exclusive flock on ``path`` (a directory is locked through its own descriptor)."""
    flags = os.O_RDONLY if directory else os.O_RDWR | os.O_CREAT
    fd = os.open(path, flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ensure(paths: ThrumPaths) -> ThrumPaths:
    """Initialise the repository if needed and make sure its daemon answers; returns the paths to use.

    Raises:
        Unavailable: autostart is off (``THRUM_NO_AUTOSTART``) or the daemon did not start.
    """
    if not paths.initialized:
        if lifecycle.autostart_disabled():
            raise errors.Unavailable(
                f"no thrum set-up in {paths.repo} and THRUM_NO_AUTOSTART is set; run `thrum init` there"
            )
        with locked(paths.repo, directory=True):
            paths = resolve(paths.repo)
            if not paths.initialized:
                paths = lifecycle.init_repo(paths.repo, start_daemon=False)
    paths.var.mkdir(parents=True, exist_ok=True)
    with locked(paths.var / "gc-mail.lock"):
        lifecycle.ensure_running(paths)
    from .replica import replica_tag

    replica_tag(paths.thrum_dir)  # set up for Gas City mail (thrum.gcmail.main.repository)
    return paths

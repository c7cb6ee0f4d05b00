"""The hooks' log: one line per surfacing and per reason a hook printed nothing.

A hook must never write to its host's terminal or fail it, so what went wrong goes
here: ``.thrum/var/hooks.log`` of the repository, or, when there is none (no
repository, thrum not set up), ``$XDG_STATE_HOME/thrum/hooks.log`` (default
``~/.local/state``). The file is rotated to ``hooks.log.1`` past `MAX_BYTES`.
Writing never raises.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing is not imported: the hook's start-up budget (mypy reads this as True)
if TYPE_CHECKING:
    from ..paths import ThrumPaths

MAX_BYTES = 1024 * 1024


def path_for(paths: ThrumPaths | None) -> str:
    if paths is not None and paths.initialized:
        return os.path.join(str(paths.var), "hooks.log")
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "thrum", "hooks.log")


def write(paths: ThrumPaths | None, text: str) -> None:
    """Append ``text`` (one line) with the time and this process's id; never raises."""
    try:
        where = path_for(paths)
        os.makedirs(os.path.dirname(where), mode=0o700, exist_ok=True)
        try:
            if os.stat(where).st_size > MAX_BYTES:
                os.replace(where, where + ".1")
        except FileNotFoundError:
            pass
        line = " ".join(str(text).split())[:2000]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        fd = os.open(where, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{stamp} [{os.getpid()}] {line}\n".encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:  # the log is the last resort: nowhere left to report to
        pass

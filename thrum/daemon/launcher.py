"""Moved to `thrum.lifecycle` (front ends must not import `thrum.daemon`).

Shim for branches written before the move; the lead removes it once they are merged.
"""

from ..lifecycle import (START_TIMEOUT, call, ensure_running, init_repo, is_running, read_pid, restart,  # noqa: F401
                         run_foreground, start, status, stop)
from ..lifecycle import wait_stopped as _wait_unlocked  # noqa: F401

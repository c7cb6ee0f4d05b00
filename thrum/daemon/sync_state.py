"""Moved to `thrum.sync.offline` (the offline cycle and the sync state file; sync must not import the daemon).

Shim for branches written before the move; the lead removes it once they are merged.
"""

from ..sync.offline import (load_state, now_iso, record, report_dict, run_offline, save_state,  # noqa: F401
                            sync_mode)

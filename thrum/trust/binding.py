"""Log binding: the team root names the log, and every line signed for it says so.

Lines can be copied from one log to another: from another team's ``a-sync``, or from
a fork of this one. Each still verifies (a signature does not know where it is). So
(docs/design/trust.md, "Log binding"; issue 25, item 5):

1. With a team root, every event this replica's daemon signs names the root's
   ``log_id`` in its chain (``"chain": {..., "log": "log_…"}``), covered by the
   signature.
2. A known event that names another log is quarantined as ``foreign-log`` on every
   replica that has the root (before any signature is checked: the check is a string
   comparison, and a line that changed its ``log`` would not verify anyway).
3. Lines that name no log stay valid: they were written before the root existed (or
   before chains) — migration keeps every honest line. What binds them is their
   signer's key and chain: a copy of another history of a known writer claims
   positions this replica already holds (a fork, reported), and a writer unknown here
   is judged by the root's admission rule.
4. Without a root there is no log id to compare with: the binding is the keys (trust
   on first use) and the chains alone (rule 3); lines naming a log are not judged by it.

Pure: the current log id is set by whoever reads the root (the daemon, `thrum verify`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["LogBinding", "foreign_log"]


class LogBinding:
    """The log id this replica's root names (None: no root). Thread-safe; cheap to read.

    ``read`` (optional) reads the root's log id again; `get` calls it when the value is
    older than ``max_age_s``, so a root committed (or pulled) while the daemon runs
    takes effect within seconds, for the lines it writes and the lines it judges.
    """

    def __init__(
        self,
        log_id: str | None = None,
        *,
        read: Callable[[], str | None] | None = None,
        max_age_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._lock = threading.Lock()
        self._read = read
        self._max_age_s = max_age_s
        self._clock = clock
        self._log_id = read() if read is not None and log_id is None else log_id
        self._at = clock()

    def get(self) -> str | None:
        if self._read is not None and self._clock() - self._at > self._max_age_s:
            self.refresh()
        return self._log_id

    def refresh(self) -> bool:
        """Read the root again (when there is a reader); True when the log id changed."""
        if self._read is None:
            return False
        return self.set(self._read())

    def set(self, log_id: str | None) -> bool:
        """Change it; True when it changed (a new root: earlier verdicts may change)."""
        with self._lock:
            changed = log_id != self._log_id
            self._log_id = log_id
            self._at = self._clock()
            return changed


def foreign_log(d: dict[str, Any], log_id: str | None) -> str | None:
    """Why ``d`` belongs to another log, or None when it may belong to this one."""
    if log_id is None:
        return None
    chain = d.get("chain")
    if chain is None:
        return None
    named = chain.get("log")
    if named is None or named == log_id:
        return None
    return f"it was signed for log {str(named)[:64]}, not this team's {log_id}"

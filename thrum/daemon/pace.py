"""How often the daemon looks at the remote: often during a conversation, rarely when idle.

Rules (issue 30, "conversations at seconds across machines"; docs/design/remotes.md,
"Adaptive sync"):

1. A look is a tip check: one ref advertisement, no objects. A full cycle (fetch,
   merge, push) follows only when the tip moved, something here waits to be pushed,
   or the last cycle failed. Local writes still start their own cycle (debounced).
2. Activity (a local write that syncs, or events received from the remote) makes
   the replica *active* for ``window_s``: it looks every ``active_s``.
3. After the window the gap doubles at each look that finds nothing, up to the
   configured ``sync_interval`` (``idle_s``), where an idle replica stays.
4. ``idle_s`` of 0 turns the timer off (no looks at all; writes and `thrum sync`
   still sync), as before.
5. A local write's cycle waits one debounce (a burst of writes batches up); during a
   burst, cycles begin at most once per `BURST_DEBOUNCES` debounces (`write_delay`).

So a replica makes at most one look per ``active_s`` while active and one per
``idle_s`` when idle; `requests_last_hour` counts what it really did.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

HOUR_S = 3600.0
CONVERSATION_TYPES = frozenset({"message.create"})

# Rule 5: 1 s at the default 0.2 s debounce. Each cycle holds the writer's lock while it
# seals and commits every segment written since the last one: at one every 0.2 s,
# sustained durable sends paid ~12 % more CPU each and ran ~25 % slower (BENCHMARKS.md,
# "Durable sends and syncs against the code before issues 25, 26, 28, 30, 31"). A write
# after a quiet spell still syncs one debounce later (a conversation's latency, issue 30).
BURST_DEBOUNCES = 5


def write_delay(debounce: float, since_last_cycle: float) -> float:
    """Seconds a cycle that local writes asked for waits (rule 5)."""
    return max(debounce, BURST_DEBOUNCES * debounce - since_last_cycle)


def starts_conversation(applied: list[dict[str, Any]]) -> bool:
    """Whether events are activity (rule 2): a message, sent or received. Housekeeping (a
    session that ends, receipts, registrations) is synced all the same, but does not buy
    two minutes of looks every second."""
    return any(d.get("type") in CONVERSATION_TYPES for d in applied)


class Pace:
    def __init__(
        self, idle_s: float, active_s: float, window_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.idle_s = idle_s
        self.active_s = min(active_s, idle_s) if idle_s > 0 else active_s
        self.window_s = window_s
        self._clock = clock
        self._active_at: float | None = None
        self._gap = self.idle_s
        self._requests: deque[float] = deque()
        self._lock = threading.Lock()  # `requested` is called from the cycle's thread

    def activity(self) -> None:
        """Something happened here or arrived from the remote: look often for a while."""
        self._active_at = self._clock()
        self._gap = self.active_s

    def active(self) -> bool:
        return self._active_at is not None and self._clock() - self._active_at < self.window_s

    def next_gap(self) -> float:
        """Seconds until the next look (inf: the timer is off)."""
        if self.idle_s <= 0:
            return float("inf")
        if self.active():
            return self.active_s
        gap = self._gap
        self._gap = min(self.idle_s, max(self.active_s, self._gap * 2))
        return gap

    def requested(self, n: int = 1) -> None:
        """The daemon asked the remote ``n`` times (a tip check, a fetch, a push)."""
        now = self._clock()
        with self._lock:
            self._requests.extend([now] * n)
            self._forget(now)

    def requests_last_hour(self) -> int:
        with self._lock:
            self._forget(self._clock())
            return len(self._requests)

    def _forget(self, now: float) -> None:
        while self._requests and self._requests[0] <= now - HOUR_S:
            self._requests.popleft()

    def status(self, tip_checks: int) -> dict[str, Any]:
        """The pace as `sync status` shows it (``tip_checks``: the looks made so far)."""
        return {
            "state": self.state(),
            "active_interval_s": self.active_s,
            "active_window_s": self.window_s,
            "tip_checks": tip_checks,
            "requests_last_hour": self.requests_last_hour(),
        }

    def state(self) -> str:
        if self.idle_s <= 0:
            return "off"
        return "active" if self.active() else "idle"

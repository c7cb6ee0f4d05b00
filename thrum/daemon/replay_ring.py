"""The hub's ring of recent events, from which a resuming subscription is replayed.

Bounded by count and by bytes: a daemon that streams a team's traffic for weeks must not
grow with it, and one event from a remote may carry up to 16 MiB of body. The byte bound
only holds if an event's weight is about what it really takes in the interpreter
(docs/design/decisions.md, "The replay ring's byte bound counts what an event holds").
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

RING_SIZE = 20_000  # recent events kept for resume (config: subscription_ring_size)
RING_BYTES = 64 * 1024 * 1024  # and at most about this much of them (config: subscription_ring_bytes)
EVENT_BYTES = 3_072  # a decoded signed, chained event's fields (measured ~2.0-3.9 KB by type)
TAG_BYTES = 512  # each scope or ref, a dict of its own

Entry = tuple[dict[str, Any], dict[str, Any] | None]  # the event, its message's scopes/refs/thread (None: unknown)


@dataclass(eq=False)
class _Slot:
    pos: int  # arrival number
    d: dict[str, Any]
    info: dict[str, Any] | None
    weight: int


def weight(d: dict[str, Any]) -> int:
    """About the bytes an event holds in memory (its body's texts dominate from a remote)."""
    body = d.get("body")
    texts = sum(len(v) for v in body.values() if isinstance(v, str)) if isinstance(body, dict) else 0
    tags = sum(len(v) for k in ("scopes", "refs") if isinstance(v := d.get(k), list))
    return EVENT_BYTES + TAG_BYTES * tags + texts


class ReplayRing:
    def __init__(self, size: int = RING_SIZE, max_bytes: int = RING_BYTES):
        self.size = max(1, size)
        self.max_bytes = max_bytes
        self.bytes = 0
        self._slots: deque[_Slot] = deque()
        self._pos: dict[str, int] = {}  # event id -> arrival number of its latest arrival
        self._arrivals = itertools.count()

    def __len__(self) -> int:
        return len(self._slots)

    def __iter__(self) -> Iterator[Entry]:
        return ((s.d, s.info) for s in self._slots)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._pos

    def remember(self, d: dict[str, Any], info: dict[str, Any] | None) -> None:
        """Keep ``d``, forgetting the oldest events while either bound would be passed."""
        pos, w = next(self._arrivals), weight(d)
        while self._slots and (len(self._slots) >= self.size or self.bytes + w > self.max_bytes):
            old = self._slots.popleft()
            self.bytes -= old.weight
            if self._pos.get(old.d["event_id"]) == old.pos:
                del self._pos[old.d["event_id"]]
        self._slots.append(_Slot(pos, d, info, w))
        self.bytes += w
        self._pos[d["event_id"]] = pos

    def after(self, event_id: str) -> list[Entry] | None:
        """The events that arrived after ``event_id``, or None when the ring no longer holds it."""
        pos = self._pos.get(event_id)
        if pos is None:
            return None
        start = pos - self._slots[0].pos + 1
        return [(s.d, s.info) for s in itertools.islice(self._slots, start, None)]

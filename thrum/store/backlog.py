"""The log after a point, for a subscriber resuming from further back than the hub's ring.

Reading the whole log for every such resume (as the hub once did) cost memory and
time in proportion to the history, and a slow subscriber resumes again and again.
So a resume reads in bounded pieces:

- `SegmentIndex` remembers the newest ``event_id`` of each segment file. A file is
  known by its inode, size and mtime, so one a sync merge replaced or an append grew
  is read again. The log is written in time order, so for a point in the recent past
  only the last segment or two of each stream can hold anything after it; the rest
  are skipped without being opened. Out-of-order events (a skewed clock, an offline
  machine) only make their segment read more often, never missed.
- `events_after` returns at most ``limit`` events after a point, in ``event_id``
  order, and whether more remain; the caller sends them and asks again from the last
  one. Its memory is bounded by ``limit`` whatever the length of the history.
- Within a segment that must be read, a line is decoded only if it can be after the
  point. Its bound is the largest ``"event_id":"<ULID>"`` in its bytes: in JSON that
  text can only be an ``event_id`` key with a string value (a quote inside a string
  is escaped), so the line's own id is one of them and the bound is never too low.
  A line without that exact text (spaces, escapes: not thrum's writing) is decoded.
  A resume's pieces step through the backlog, and each step skips what earlier
  steps sent for the price of a regular-expression search, not a JSON decode.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from .. import events as ev
from .log import EventLog
from .logfiles import open_segment

_ID_TEXT = re.compile(rb'"event_id":"([0-7][0-9A-HJKMNP-TV-Z]{25})"')


@dataclass(frozen=True)
class _Seen:
    ino: int
    size: int
    mtime_ns: int
    newest: str  # the largest event_id in the file ("" when it holds none)


class SegmentIndex:
    """The newest event_id of each segment file, as of the file's last known state."""

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}
        self.files_read = 0  # segment files parsed so far (tests and benchmarks look)

    def newest(self, shard: str, st: os.stat_result) -> str | None:
        """The remembered newest event_id of ``shard`` if the file is unchanged since."""
        seen = self._seen.get(shard)
        if seen is None or (seen.ino, seen.size, seen.mtime_ns) != (st.st_ino, st.st_size, st.st_mtime_ns):
            return None
        return seen.newest

    def remember(self, shard: str, st: os.stat_result, newest: str) -> None:
        self._seen[shard] = _Seen(st.st_ino, st.st_size, st.st_mtime_ns, newest)

    def forget_missing(self, present: set[str]) -> None:
        for shard in [s for s in self._seen if s not in present]:
            del self._seen[shard]


def events_after(
    event_log: EventLog, index: SegmentIndex, since: str, types: frozenset[str], limit: int
) -> tuple[list[dict], bool]:
    """At most ``limit`` events of ``types`` with an event_id after ``since``, in event_id
    order (each id once), and True when there are more after the last one returned."""
    picked: dict[str, dict] = {}
    more = False
    shards = event_log.shards()
    for shard in shards:
        try:
            st = os.lstat(event_log.root / shard)
        except OSError:
            continue
        known = index.newest(shard, st)
        if known is not None and known <= since:
            continue
        newest = _read_after(event_log, shard, since, types, picked)
        index.files_read += 1
        index.remember(shard, st, newest)
        if len(picked) > 2 * limit:
            more = True
            picked = _smallest(picked, limit)
    index.forget_missing(set(shards))
    if len(picked) > limit:
        more = True
        picked = _smallest(picked, limit)
    return [picked[k] for k in sorted(picked)], more


def _read_after(event_log: EventLog, shard: str, since: str, types: frozenset[str], picked: dict) -> str:
    """Add the events of one segment after ``since`` to ``picked``; an upper bound of its ids."""
    try:
        with open_segment(event_log.root, shard) as f:
            data = f.read()
    except FileNotFoundError:
        return ""
    newest = ""
    for line in data[: data.rfind(b"\n") + 1].split(b"\n"):  # complete lines only
        if not line:
            continue
        found = _ID_TEXT.findall(line)
        bound = max(found).decode() if found else None
        if bound is not None and bound <= since:
            newest = max(newest, bound)
            continue
        try:
            d = ev.decode_line(line)
        except ev.MalformedEvent:
            continue  # torn or damaged: the log reader reports it
        eid = d["event_id"]
        newest = max(newest, eid)
        if eid > since and d["type"] in types:
            picked.setdefault(eid, d)
    return newest


def _smallest(picked: dict[str, dict], limit: int) -> dict[str, dict]:
    return {k: picked[k] for k in sorted(picked)[:limit]}

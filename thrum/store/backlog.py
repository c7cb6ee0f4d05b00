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
- A resume walks the log with a `BacklogReader`: a scan notes where the next
  50,000 lines after its point are (their ids and offsets, ~150 bytes each, not the
  events), then pieces of events are read from those places; the files are scanned
  again only when those run out. Memory is bounded by the window and the piece,
  whatever the length of the history; time is one scan per 50,000 events, not one
  per piece.
- Within a segment that must be scanned, a line's id is read from its bytes: in JSON
  the text ``"event_id":"<ULID>"`` can only be an ``event_id`` key with a string
  value (a quote inside a string is escaped), so a line that shows it once shows its
  own id. A line that shows it several times (nested objects) or not at all (other
  spacing, escapes: not thrum's writing) is decoded; when the place read later holds
  another line (a sync merge replaced the file), the event is found by its id.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

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


Pointer = tuple[str, str, int, int]  # (event_id, shard, offset, length) of one line


class BacklogReader:
    """One resume's walk through the log after its point, a piece at a time.

    A scan (`pointers_after`) notes where the next ``window`` lines after the point are
    (about 150 bytes each, never the events); pieces are then read from those places,
    so the files are scanned about once per ``window`` events instead of once per
    piece. A scan is made again when what is left fits in one piece, so a last piece
    (``skip_above`` None) always comes from a scan made after the previous piece was
    handed out.
    """

    def __init__(
        self,
        event_log: EventLog,
        index: SegmentIndex,
        since: str,
        types: frozenset[str],
        *,
        piece: int,
        window: int = 50_000,
    ) -> None:
        self.log, self.index, self.types = event_log, index, types
        self.cursor = since  # the last event_id handed out
        self.piece, self.window = piece, max(piece, window)
        self._pointers: list[Pointer] = []
        self._pos = 0
        self._truncated = False
        self._end = since
        self.scans = 0

    def next_piece(self) -> tuple[list[dict[str, Any]], str | None]:
        """The next events in event_id order, and ``skip_above``: when more follow, an
        event appended from now on with an id above it will come in a later piece
        (None: this is the last piece)."""
        if len(self._pointers) - self._pos <= self.piece:
            self._scan()
        take = self._pointers[self._pos : self._pos + self.piece]
        self._pos += len(take)
        if take:
            self.cursor = take[-1][0]
        more = self._pos < len(self._pointers) or self._truncated
        return _read(self.log, take, self.types), (self._end if more else None)

    def _scan(self) -> None:
        self.scans += 1
        self._pointers, self._truncated = pointers_after(self.log, self.index, self.cursor, self.window)
        self._pos = 0
        self._end = self._pointers[-1][0] if self._pointers else self.cursor


def events_after(
    event_log: EventLog, index: SegmentIndex, since: str, types: frozenset[str], limit: int
) -> tuple[list[dict[str, Any]], bool]:
    """At most ``limit`` events of ``types`` with an event_id after ``since``, in event_id
    order (each id once), and True when there may be more after the last one returned."""
    pointers, more = pointers_after(event_log, index, since, limit)
    return _read(event_log, pointers, types), more


def pointers_after(event_log: EventLog, index: SegmentIndex, since: str, limit: int) -> tuple[list[Pointer], bool]:
    """Where the first ``limit`` lines with an event_id after ``since`` are, in event_id
    order (each id once), and True when there are more after the last one."""
    picked: dict[str, Pointer] = {}
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
        newest = _scan_segment(event_log, shard, since, picked)
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


def _scan_segment(event_log: EventLog, shard: str, since: str, picked: dict[str, Pointer]) -> str:
    """Note where the lines of one segment after ``since`` are; an upper bound of its ids."""
    try:
        with open_segment(event_log.root, shard) as f:
            data = f.read()
    except FileNotFoundError:
        return ""
    newest = ""
    offset = 0
    for line in data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]:  # complete lines only
        at, offset = offset, offset + len(line) + 1
        if not line:
            continue
        found = _ID_TEXT.findall(line)
        if len(found) == 1:  # the line's own id (it is among them), and nothing else claims to be
            eid = found[0].decode()
        else:
            if found and max(found).decode() <= since:
                newest = max(newest, max(found).decode())
                continue
            try:
                eid = ev.decode_line(line)["event_id"]
            except ev.MalformedEvent:
                continue  # torn or damaged: the log reader reports it
        newest = max(newest, eid)
        if eid > since:
            picked.setdefault(eid, (eid, shard, at, len(line)))
    return newest


def _read(event_log: EventLog, pointers: list[Pointer], types: frozenset[str]) -> list[dict[str, Any]]:
    """The events at ``pointers`` that are of ``types``, in the pointers' order. A line
    that moved (a sync merge replaced its file) is found again by its id in that file."""
    by_shard: dict[str, bytes] = {}
    out = []
    for eid, shard, at, length in pointers:
        data = by_shard.get(shard)
        if data is None:
            try:
                with open_segment(event_log.root, shard) as f:
                    data = by_shard[shard] = f.read()
            except FileNotFoundError:
                continue
        d = _decode(data[at : at + length])
        if d is None or d["event_id"] != eid:  # moved, or a line whose text misled the scan
            d = _find(data, eid) or d
        if d is not None and d["type"] in types:
            out.append(d)
    return out


def _decode(line: bytes) -> dict[str, Any] | None:
    try:
        return ev.decode_line(line)
    except ev.MalformedEvent:
        return None


def _find(data: bytes, eid: str) -> dict[str, Any] | None:
    needle = f'"event_id":"{eid}"'.encode()
    for line in data.split(b"\n"):
        if needle in line:
            d = _decode(line)
            if d is not None and d["event_id"] == eid:
                return d
    return None


def _smallest(picked: dict[str, Pointer], limit: int) -> dict[str, Pointer]:
    return {k: picked[k] for k in sorted(picked)[:limit]}

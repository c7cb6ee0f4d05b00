"""The append-only JSONL event log: size-capped segments in the ``a-sync`` worktree.

Rules:

1. Layout (`thrum.events.shards`, docs/design/merge.md): an event belongs to a
   stream (``events``, ``messages/{agent}``, ``receipts/{agent}``) and is stored
   in one of its segments, ``{stream}/{n}.jsonl``. The writer appends to the
   highest segment of a stream while it is under `SEGMENT_CAP` bytes and starts
   the next one when a line would not fit, so no file grows with the history
   (a line larger than the cap gets a segment of its own).
2. Appending is write + flush + fsync. A batch of events is one group commit: one
   fsync per touched segment, however many events. When `append` returns, the
   events survive ``kill -9`` and power loss.
3. Nothing already written is ever rewritten by appending. The sync merge hands
   over whole merged segments (`replace_segments`, under the daemon's writer lock):
   each replaces its file atomically, all of them with one fsync round. An event
   stays in the segment it was first written to.
4. A torn last line (crash mid-write) or a malformed line is reported and skipped,
   never fatal, never deleted. Before appending to a segment whose last line is
   torn, a newline is written so the torn bytes stay a line of their own.
   A batch that fails in this process (disk full, I/O error) is undone: every
   segment it touched is truncated back to its size before the batch, at once or,
   if that fails too, before the next append to it. Nothing of a failed batch
   stays, so "nothing was stored" is true.
5. Reading "what is new" uses a per-file `Position` (byte offset plus a digest of
   the TAIL_BYTES bytes just before it, so normally the whole last line with its
   event_id). If a file was replaced (sync merge) so the digest no longer matches,
   it is read again from the start; the fold is idempotent so that costs time,
   never correctness.
6. The worktree is untrusted: only the layout's own paths are read or written,
   and neither links nor directories that are links are followed (`thrum.nofollow`,
   the walker the sync uses too).
7. Positions are this module's to report: `end_position` after an append or a
   replacement, `read_shard` as it reads; `decode` is the one way received lines
   become records (`parse_lines`).
"""

from __future__ import annotations

import hashlib
import logging
import os
from concurrent.futures import wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from .. import events as ev
from ..durable import fsync_dir, fsync_pool, write_batch
from ..nofollow import entries, open_dir, read_regular
from .logfiles import open_segment

log = logging.getLogger(__name__)

TAIL_BYTES = 4096  # enough to hold the event_id of the last line read in all but huge lines
SEGMENT_CAP = 64 * 1024  # bytes per segment; measured in docs/design/merge.md ("Choosing the cap")
STREAM_KINDS = ("messages", "receipts")


@dataclass(frozen=True)
class Position:
    """How far a shard has been read: offset of the end of the last complete line."""

    offset: int = 0
    tail: str = ""  # sha1 of the TAIL_BYTES bytes before offset
    # Read again from the start, the file having changed under its stored position: what
    # was counted of it before (refused lines past the row bound) is counted afresh.
    again: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class LogIssue:
    """A line the reader skipped: where it is and why."""

    shard: str
    offset: int
    reason: str
    line: bytes = b""


@dataclass
class ReadResult:
    """Events read from the log, in file order per shard."""

    records: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (shard, normalised event)
    lines: list[bytes] = field(default_factory=list)  # the raw line of each record (for thrum.trust)
    issues: list[LogIssue] = field(default_factory=list)
    positions: dict[str, Position] = field(default_factory=dict)
    torn: list[LogIssue] = field(default_factory=list)  # incomplete last lines (not yet counted as malformed)


def _tail_digest(data: bytes) -> str:
    return hashlib.sha1(data[-TAIL_BYTES:]).hexdigest() if data else ""


def _end_of(fd: int) -> Position:
    """The `Position` at the end of a segment just appended to through ``fd`` (it ends
    with a whole line: every appended line ends with a newline)."""
    size = os.fstat(fd).st_size
    return Position(size, _tail_digest(os.pread(fd, min(size, TAIL_BYTES), max(0, size - TAIL_BYTES))))


def _fsync_together(fds: list[int]) -> None:
    """fsync every descriptor at once (the filesystem merges them into fewer journal commits):
    the first in this thread, the others in the pool (a hand-off to it costs ~10 µs of CPU;
    eight clients' batch touches a file per client)."""
    others = [fsync_pool().submit(os.fsync, fd) for fd in fds[1:]]
    try:
        os.fsync(fds[0])
    finally:
        wait(others)  # none may still run when the caller closes the descriptors
    for f in others:
        f.result()


def parse_lines(shard: str, data: bytes, base: int, result: ReadResult, *, at_end: bool = True) -> int:
    """Decode the complete lines of ``data`` (which starts at file offset ``base``).

    Returns the offset just past the last complete line. Pure apart from filling
    ``result``; shared by the log reader and the sync merge fold. ``at_end``: data
    runs to the end of the shard, so bytes after the last newline are a torn line.
    """
    end = data.rfind(b"\n") + 1  # 0 when there is no complete line
    if end < len(data) and at_end:
        result.torn.append(LogIssue(shard, base + end, "incomplete last line", data[end : end + 200]))
    pos = base
    decode = ev.decode_line
    append = result.records.append
    keep_line = result.lines.append
    for line in data[: end - 1].split(b"\n") if end else ():
        if line and not line.isspace():
            try:
                append((shard, decode(line)))
                keep_line(line)
            except ev.MalformedEvent as exc:
                result.issues.append(LogIssue(shard, pos, str(exc), line[:200]))
        pos += len(line) + 1
    return base + end


class EventLog:
    """Append-only JSONL log in size-capped segments, rooted at the sync worktree directory."""

    def __init__(self, root: os.PathLike[str] | str, segment_cap: int = SEGMENT_CAP):
        self.root = Path(root)
        self.segment_cap = segment_cap
        self._needs_newline: dict[str, bool] = {}
        self._tails: dict[str, list[int]] = {}  # stream -> [highest segment number, its size]
        self._truncate_to: dict[str, int] = {}  # segments a failed batch could not be undone in yet
        self.appended_ends: dict[str, Position] = {}  # segment -> its end after the last append (`appended_end`)

    # ------------------------------------------------------------------ paths
    def path(self, shard: str) -> Path:
        """The file of a segment path (``messages/alice/000001.jsonl``).

        Raises:
            ValueError: not a path of the layout.
        """
        ev.parse_log_path(shard)
        return self.root / shard

    def shards(self) -> list[str]:
        """Every segment file present: the ``events`` stream first, then the agents'
        streams by kind and name; segments of a stream in number order."""
        out = [ev.segment_path(ev.EVENTS_STREAM, n) for n in self._segments(ev.EVENTS_STREAM)]
        for kind in STREAM_KINDS:
            for name in sorted(entries(self.root, kind, want_dirs=True)):
                stream = f"{kind}/{name}"
                try:
                    ev.check_stream(stream)
                except ValueError:
                    continue
                out.extend(ev.segment_path(stream, n) for n in self._segments(stream))
        return out

    def _segments(self, stream: str) -> list[int]:
        """Numbers of the regular segment files of ``stream``, ascending (links and strays skipped)."""
        numbers = []
        for name in entries(self.root, stream, want_dirs=False):
            n = ev.segment_number(name)
            if n is not None:
                numbers.append(n)
        return sorted(numbers)

    # ------------------------------------------------------------------ writing
    def append(self, events: Iterable[dict[str, Any]]) -> list[str]:
        """Durably append events (dicts already validated) to their streams' segments.

        Group commit: each touched segment gets one write and one fsync, and the
        fsyncs of several segments run concurrently (the filesystem merges them
        into far fewer journal commits than one after another). Returns the
        segment paths touched (the sync step commits exactly those).
        """
        return list(dict.fromkeys(self.append_events(events)))

    def append_events(self, events: Iterable[dict[str, Any]], lines: list[bytes] | None = None) -> list[str]:
        """`append`, returning the segment path each event went to (in the events' order).
        ``lines``: the events' lines (`events.encode_line`), when the caller has them already."""
        events = list(events)
        if lines is None:
            lines = [ev.encode_line(d) for d in events]
        by_stream: dict[str, list[int]] = {}
        for i, d in enumerate(events):
            by_stream.setdefault(ev.stream_for(d), []).append(i)
        placed = [""] * len(events)
        by_path: dict[str, list[bytes]] = {}
        for stream, idxs in by_stream.items():
            stream_lines = [lines[i] for i in idxs]
            k = 0
            for path, chunk in self._place(stream, stream_lines):
                by_path.setdefault(path, []).extend(chunk)
                for _ in chunk:
                    placed[idxs[k]] = path
                    k += 1
        self._write_durably(by_path)
        return placed

    def append_lines(self, shard: str, lines: Iterable[bytes]) -> None:
        """Durably append raw lines to one existing segment, wherever it is in its stream."""
        self.append_to({shard: list(lines)})

    def append_to(self, by_shard: dict[str, list[bytes]]) -> None:
        """Durably append raw lines to existing segments, wherever each is in its stream
        (one write each, the fsyncs together).

        For lines that belong next to lines already written (the seals written
        before a commit cover the lines of that file); no roll-over happens here.

        Raises:
            ValueError: a path is not one of the layout, or a line holds a newline
                (then nothing is written).
        """
        by_path: dict[str, list[bytes]] = {}
        for shard, lines in by_shard.items():
            ev.parse_log_path(shard)
            payload = []
            for line in lines:
                body = line[:-1] if line.endswith(b"\n") else line
                if b"\n" in body:
                    raise ValueError("a log line cannot hold a newline")
                payload.append(body + b"\n")
            if payload:
                by_path[shard] = payload
        if by_path:
            for shard in by_path:
                self._tails.pop(shard.rsplit("/", 1)[0], None)  # the stream's tail may have grown
            self._write_durably(by_path)

    def _place(self, stream: str, lines: list[bytes]) -> list[tuple[str, list[bytes]]]:
        """Split a stream's new lines over its segments: the highest one while it has
        room, then new ones, each at most `segment_cap` bytes (a longer line alone)."""
        tail = self._tail(stream)
        out: list[tuple[str, list[bytes]]] = []
        chunk: list[bytes] = []
        for line in lines:
            if tail[1] and tail[1] + len(line) > self.segment_cap:
                if chunk:
                    out.append((ev.segment_path(stream, tail[0]), chunk))
                    chunk = []
                tail[0], tail[1] = tail[0] + 1, 0
            chunk.append(line)
            tail[1] += len(line)
        if chunk:
            out.append((ev.segment_path(stream, tail[0]), chunk))
        return out

    def _tail(self, stream: str) -> list[int]:
        """[number, size] of the segment a stream's next line goes to (cached until a merge)."""
        tail = self._tails.get(stream)
        if tail is None:
            numbers = self._segments(stream)
            n = numbers[-1] if numbers else 1
            try:
                size = os.stat(self.root / ev.segment_path(stream, n), follow_symlinks=False).st_size
            except FileNotFoundError:
                size = 0
            tail = self._tails[stream] = [n, size]
        return tail

    def _write_durably(self, by_path: dict[str, list[bytes]]) -> None:
        opened: list[tuple[str, int, bool, int]] = []  # (segment, fd, created, size before)
        self.appended_ends = {}
        try:
            for shard, lines in by_path.items():
                opened.append((shard, *self._write_lines(shard, b"".join(lines))))
            _fsync_together([fd for _, fd, _, _ in opened])
            ends = {shard: _end_of(fd) for shard, fd, _, _ in opened}
        except BaseException:
            for shard, fd, _, size in opened:
                self._undo(shard, fd, size)
            self._tails.clear()  # sizes may be off now: count again next time
            raise
        finally:
            for _, fd, _, _ in opened:
                os.close(fd)
        for shard, _, created, _ in opened:
            self._needs_newline[shard] = False
            if created:
                fsync_dir(self.path(shard).parent)
        self.appended_ends = ends

    def _undo(self, shard: str, fd: int, size: int) -> None:
        """Cut a segment back to ``size`` (its length before a failed batch); retried on the next append."""
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
            self._truncate_to.pop(shard, None)
        except OSError as exc:
            log.warning("cannot undo a failed append to %s yet (%s); retrying before the next one", shard, exc)
            self._truncate_to[shard] = size

    def _write_lines(self, shard: str, payload: bytes) -> tuple[int, bool, int]:
        """Write (not yet fsync) a payload at the end of a segment; the open fd, whether it
        was created, and its size before."""
        stream, name = shard.rsplit("/", 1)
        dfd = open_dir(self.root, stream, create=True)
        assert dfd is not None  # with create, the directory is made when absent
        try:
            created = False
            flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC  # read too: _ends_torn preads
            try:
                fd = os.open(name, flags, dir_fd=dfd)
            except FileNotFoundError:
                fd = os.open(name, flags | os.O_CREAT, 0o644, dir_fd=dfd)
                created = True
        finally:
            os.close(dfd)
        size = None
        try:
            pending = self._truncate_to.get(shard)
            if pending is not None and pending <= os.fstat(fd).st_size:
                os.ftruncate(fd, pending)
                os.fsync(fd)
                del self._truncate_to[shard]
            size = os.fstat(fd).st_size
            if self._ends_torn(shard, fd):
                payload = b"\n" + payload
            view = memoryview(payload)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        except BaseException:
            if size is not None:
                self._undo(shard, fd, size)
            os.close(fd)
            raise
        return fd, created, size

    def _ends_torn(self, shard: str, fd: int) -> bool:
        known = self._needs_newline.get(shard)
        if known is not None:
            return known
        size = os.fstat(fd).st_size
        if size == 0:
            return False
        return os.pread(fd, 1, size - 1) != b"\n"

    def forget_cached_state(self) -> None:
        """Call after segment files were replaced or added underneath (a worktree made again)."""
        self._needs_newline.clear()
        self._tails.clear()
        self._truncate_to.clear()

    # ------------------------------------------------------------------ the sync's side
    def replace_segments(self, items: list[tuple[str, bytes]]) -> list[os.stat_result]:
        """Put merged segments in place (rule 3); the stat of each file written.

        Raises:
            ValueError: a path is not one of the layout's.
            OSError: a file could not be written (those before it stay replaced).
        """
        for shard, _ in items:
            ev.parse_log_path(shard)
        try:
            return write_batch(self.root, items)
        finally:
            self.forget_cached_state()

    def read_file(self, shard: str) -> tuple[bytes, os.stat_result] | None:
        """A whole segment and its stat, for the sync to commit or merge (None: no such file).
        A link met on the way is removed (links are never thrum's), never followed.

        Raises:
            ValueError: not a path of the layout. OSError: not a regular file.
        """
        ev.parse_log_path(shard)
        return read_regular(self.root, shard, drop_links=True)

    def decode(self, received: dict[str, list[bytes]]) -> ReadResult:
        """Lines the sync received, per segment, as records (and issues), like lines read."""
        result = ReadResult()
        for shard, lines in received.items():
            parse_lines(shard, b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines), 0, result)
        return result

    def appended_end(self, shard: str) -> Position:
        """`end_position` of a segment the last append wrote to, as that append left it
        (read from the descriptor it wrote through: no second open and walk of the path,
        which cost a durable send ~4 % of its CPU); any other segment as it is now."""
        end = self.appended_ends.get(shard)
        return end if end is not None else self.end_position(shard)

    def end_position(self, shard: str) -> Position:
        """The position just past the last complete line of a segment as it is now
        (none: `Position()`): its offset and the digest of the `TAIL_BYTES` before it."""
        try:
            f = open_segment(self.root, shard)
        except FileNotFoundError:
            return Position()
        with f:
            size = os.fstat(f.fileno()).st_size
            lo = max(0, size - TAIL_BYTES)
            f.seek(lo)
            tail = f.read(size - lo)
            if tail and not tail.endswith(b"\n"):  # a torn last line: find the last whole one
                f.seek(0)
                data = f.read(size)
                end = data.rfind(b"\n") + 1
                return Position(end, _tail_digest(data[:end])) if end else Position()
        return Position(size, _tail_digest(tail))

    # ------------------------------------------------------------------ reading
    def read_all(self) -> ReadResult:
        return self.read_new({})

    def read_new(self, positions: dict[str, Position]) -> ReadResult:
        """Events appended since ``positions`` (all events for unknown shards)."""
        result = ReadResult()
        for shard in self.shards():
            self.read_shard(shard, positions.get(shard, Position()), result)
        return result

    def read_shard(self, shard: str, pos: Position, result: ReadResult, *, max_bytes: int | None = None) -> bool:
        """Read the complete lines of one shard after ``pos`` into ``result``.

        With ``max_bytes``, read about that much (always whole lines, at least one)
        and leave the rest for the next call. Returns True when the end of the shard
        was reached (then an incomplete last line is reported as torn).
        """
        try:
            f = open_segment(self.root, shard)
        except FileNotFoundError:
            return True
        with f:
            size = os.fstat(f.fileno()).st_size
            start = pos.offset
            again = pos.again or getattr(result.positions.get(shard), "again", False)
            if start:
                if start > size:
                    start, again = 0, True
                else:
                    lo = max(0, start - TAIL_BYTES)
                    f.seek(lo)
                    if _tail_digest(f.read(start - lo)) != pos.tail:
                        log.info("%s changed under its stored position; reading it again", shard)
                        start, again = 0, True
            if start == size:
                result.positions[shard] = pos if start else Position(again=again)
                return True
            f.seek(start)
            if max_bytes is None or size - start <= max_bytes:
                data = f.read()
                at_end = True
            else:
                data = f.read(max_bytes)
                while b"\n" not in data and start + len(data) < size:  # one very long line
                    more = f.read(max_bytes)
                    if not more:
                        break
                    data += more
                at_end = start + len(data) >= size
                if not at_end:
                    data = data[: data.rfind(b"\n") + 1]
            end = parse_lines(shard, data, start, result, at_end=at_end)
            if end == start:
                result.positions[shard] = pos if start else Position(again=again)
                return at_end
            rel_end = end - start
            tail_src = data[max(0, rel_end - TAIL_BYTES) : rel_end]
            if len(tail_src) < TAIL_BYTES and start > 0:
                lo = max(0, end - TAIL_BYTES)
                f.seek(lo)
                tail_src = f.read(end - lo)
        result.positions[shard] = Position(end, _tail_digest(tail_src), again=again)
        return at_end

    def iter_lines(self, shard: str) -> Iterator[bytes]:
        """Raw lines of a shard (for tools and tests)."""
        try:
            f = open_segment(self.root, shard)
        except FileNotFoundError:
            return
        with f:
            yield from f

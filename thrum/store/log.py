"""The append-only JSONL event log: shards in the ``a-sync`` worktree.

Rules:

1. Layout: ``events.jsonl`` (lifecycle and group events), ``messages/{agent}.jsonl``
   (that agent's message events), ``receipts/{agent}.jsonl`` (its read, unread and
   archive marks). `thrum.events.shard_for` decides where an event goes.
2. Appending is write + flush + fsync. A batch of events is one group commit: one
   fsync per touched shard, however many events. When `append` returns, the events
   survive ``kill -9`` and power loss.
3. Nothing already written is ever rewritten by this module (the sync merge
   replaces whole files atomically, under the daemon's writer lock).
4. A torn last line (crash mid-write) or a malformed line is reported and skipped,
   never fatal, never deleted. Before appending to a shard whose last line is
   torn, a newline is written so the torn bytes stay a line of their own.
5. Reading "what is new" uses a per-shard `Position` (byte offset plus a digest of
   the bytes just before it). If a shard was replaced (sync merge) so the digest no
   longer matches, the shard is read again from the start; the fold is idempotent
   so that costs time, never correctness.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from .. import events as ev

log = logging.getLogger(__name__)

TAIL_BYTES = 64
SHARD_DIRS = ("messages", "receipts")


@dataclass(frozen=True)
class Position:
    """How far a shard has been read: offset of the end of the last complete line."""

    offset: int = 0
    tail: str = ""  # sha1 of the TAIL_BYTES bytes before offset

    def to_json(self) -> list:
        return [self.offset, self.tail]

    @classmethod
    def from_json(cls, value) -> "Position":
        try:
            return cls(int(value[0]), str(value[1]))
        except (TypeError, ValueError, IndexError):
            return cls()


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

    records: list[tuple[str, dict]] = field(default_factory=list)  # (shard, normalised event)
    issues: list[LogIssue] = field(default_factory=list)
    positions: dict[str, Position] = field(default_factory=dict)
    torn: list[LogIssue] = field(default_factory=list)  # incomplete last lines (not yet counted as malformed)


def _tail_digest(data: bytes) -> str:
    return hashlib.sha1(data[-TAIL_BYTES:]).hexdigest() if data else ""


def parse_lines(shard: str, data: bytes, base: int, result: ReadResult) -> int:
    """Decode the complete lines of ``data`` (which starts at file offset ``base``).

    Returns the offset just past the last complete line. Pure apart from filling
    ``result``; shared by the log reader and the sync merge fold.
    """
    end = data.rfind(b"\n") + 1  # 0 when there is no complete line
    if end < len(data):
        result.torn.append(LogIssue(shard, base + end, "incomplete last line", data[end:end + 200]))
    pos = 0
    decode = ev.decode_line
    records = result.records
    while pos < end:
        nl = data.index(b"\n", pos)
        line = data[pos:nl]
        if line.strip():
            try:
                records.append((shard, decode(line)))
            except ev.MalformedEvent as exc:
                result.issues.append(LogIssue(shard, base + pos, str(exc), line[:200]))
        pos = nl + 1
    return base + end


class EventLog:
    """Append-only sharded JSONL log rooted at the sync worktree directory."""

    def __init__(self, root: os.PathLike | str):
        self.root = Path(root)
        self._needs_newline: dict[str, bool] = {}

    # ------------------------------------------------------------------ paths
    def path(self, shard: str) -> Path:
        ev.shard_owner(shard)  # raises ValueError for anything that is not a shard path
        return self.root / shard

    def shards(self) -> list[str]:
        """Every shard file present, ``events.jsonl`` first, then sorted."""
        out = []
        if (self.root / "events.jsonl").is_file():
            out.append("events.jsonl")
        for sub in SHARD_DIRS:
            d = self.root / sub
            if d.is_dir():
                for p in sorted(d.iterdir()):
                    if p.suffix == ".jsonl" and p.is_file():
                        rel = f"{sub}/{p.name}"
                        try:
                            ev.shard_owner(rel)
                        except ValueError:
                            log.warning("ignoring unexpected file %s in the log", rel)
                            continue
                        out.append(rel)
        return out

    # ------------------------------------------------------------------ writing
    def append(self, events: Iterable[dict]) -> list[str]:
        """Durably append events (dicts already validated) to their shards.

        Group commit: each touched shard gets one write and one fsync. Returns the
        shards touched (the sync step commits exactly those).
        """
        by_shard: dict[str, list[bytes]] = {}
        for d in events:
            by_shard.setdefault(ev.shard_for(d), []).append(ev.encode_line(d))
        for shard, lines in by_shard.items():
            self._append_lines(shard, b"".join(lines))
        return list(by_shard)

    def _append_lines(self, shard: str, payload: bytes) -> None:
        path = self.path(shard)
        created = not path.exists()
        if created:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if self._ends_torn(shard, fd):
                payload = b"\n" + payload
            view = memoryview(payload)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        self._needs_newline[shard] = False
        if created:
            _fsync_dir(path.parent)

    def _ends_torn(self, shard: str, fd: int) -> bool:
        known = self._needs_newline.get(shard)
        if known is not None:
            return known
        size = os.fstat(fd).st_size
        if size == 0:
            return False
        return os.pread(fd, 1, size - 1) != b"\n"

    def forget_cached_state(self) -> None:
        """Call after shard files were replaced underneath (sync merge)."""
        self._needs_newline.clear()

    # ------------------------------------------------------------------ reading
    def read_all(self) -> ReadResult:
        return self.read_new({})

    def read_new(self, positions: dict[str, Position]) -> ReadResult:
        """Events appended since ``positions`` (all events for unknown shards)."""
        result = ReadResult()
        for shard in self.shards():
            self.read_shard(shard, positions.get(shard, Position()), result)
        return result

    def read_shard(self, shard: str, pos: Position, result: ReadResult) -> None:
        path = self.path(shard)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                start = pos.offset
                if start:
                    if start > size:
                        start = 0
                    else:
                        lo = max(0, start - TAIL_BYTES)
                        f.seek(lo)
                        if _tail_digest(f.read(start - lo)) != pos.tail:
                            start = 0
                if start == size:
                    result.positions[shard] = pos
                    return
                f.seek(start)
                data = f.read()
        except FileNotFoundError:
            return
        end = parse_lines(shard, data, start, result)
        if end == start:
            result.positions[shard] = pos if start else Position()
            return
        # digest of the bytes just before `end`
        rel_end = end - start
        tail_src = data[max(0, rel_end - TAIL_BYTES):rel_end]
        if len(tail_src) < TAIL_BYTES and start > 0:
            with open(path, "rb") as f:
                lo = max(0, end - TAIL_BYTES)
                f.seek(lo)
                tail_src = f.read(end - lo)
        result.positions[shard] = Position(end, _tail_digest(tail_src))

    def position_at_end(self, shard: str) -> Position:
        """The position just past the last complete line of a shard as it is now."""
        path = self.path(shard)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return Position()
        end = data.rfind(b"\n") + 1
        return Position(end, _tail_digest(data[:end])) if end else Position()

    def iter_lines(self, shard: str) -> Iterator[bytes]:
        """Raw lines of a shard (for tools and tests)."""
        try:
            with open(self.path(shard), "rb") as f:
                for line in f:
                    yield line
        except FileNotFoundError:
            return


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

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
   A batch that fails in this process (disk full, I/O error) is undone: every
   shard it touched is truncated back to its size before the batch, at once or,
   if that fails too, before the next append to it. Nothing of a failed batch
   stays, so "nothing was stored" is true.
5. Reading "what is new" uses a per-shard `Position` (byte offset plus a digest of
   the TAIL_BYTES bytes just before it, so normally the whole last line with its
   event_id). If a shard was replaced (sync merge) so the digest no longer matches,
   the shard is read again from the start; the fold is idempotent so that costs
   time, never correctness.
6. The worktree is untrusted: shard names are checked (no path traversal) and
   symlinks are neither read nor appended through.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from .. import events as ev

log = logging.getLogger(__name__)

TAIL_BYTES = 4096  # enough to hold the event_id of the last line read in all but huge lines
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
    lines: list[bytes] = field(default_factory=list)  # the raw line of each record (for thrum.trust)
    issues: list[LogIssue] = field(default_factory=list)
    positions: dict[str, Position] = field(default_factory=dict)
    torn: list[LogIssue] = field(default_factory=list)  # incomplete last lines (not yet counted as malformed)


def _tail_digest(data: bytes) -> str:
    return hashlib.sha1(data[-TAIL_BYTES:]).hexdigest() if data else ""


def parse_lines(shard: str, data: bytes, base: int, result: ReadResult, *, at_end: bool = True) -> int:
    """Decode the complete lines of ``data`` (which starts at file offset ``base``).

    Returns the offset just past the last complete line. Pure apart from filling
    ``result``; shared by the log reader and the sync merge fold. ``at_end``: data
    runs to the end of the shard, so bytes after the last newline are a torn line.
    """
    end = data.rfind(b"\n") + 1  # 0 when there is no complete line
    if end < len(data) and at_end:
        result.torn.append(LogIssue(shard, base + end, "incomplete last line", data[end:end + 200]))
    pos = base
    decode = ev.decode_line
    append = result.records.append
    keep_line = result.lines.append
    for line in data[:end - 1].split(b"\n") if end else ():
        if line and not line.isspace():
            try:
                append((shard, decode(line)))
                keep_line(line)
            except ev.MalformedEvent as exc:
                result.issues.append(LogIssue(shard, pos, str(exc), line[:200]))
        pos += len(line) + 1
    return base + end


class EventLog:
    """Append-only sharded JSONL log rooted at the sync worktree directory."""

    def __init__(self, root: os.PathLike | str):
        self.root = Path(root)
        self._needs_newline: dict[str, bool] = {}
        self._truncate_to: dict[str, int] = {}  # shards a failed batch could not be undone in yet

    # ------------------------------------------------------------------ paths
    def path(self, shard: str) -> Path:
        ev.shard_owner(shard)  # raises ValueError for anything that is not a shard path
        return self.root / shard

    def shards(self) -> list[str]:
        """Every shard file present, ``events.jsonl`` first, then sorted."""
        out = []
        top = self.root / "events.jsonl"
        if top.is_file() and not top.is_symlink():
            out.append("events.jsonl")
        for sub in SHARD_DIRS:
            d = self.root / sub
            if d.is_dir() and not d.is_symlink():
                for p in sorted(d.iterdir()):
                    if p.is_symlink():
                        log.warning("ignoring symlink %s/%s in the log", sub, p.name)
                        continue
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

        Group commit: each touched shard gets one write and one fsync, and the
        fsyncs of several shards run concurrently (the filesystem merges them into
        far fewer journal commits than one after another). Returns the shards
        touched (the sync step commits exactly those).
        """
        by_shard: dict[str, list[bytes]] = {}
        for d in events:
            by_shard.setdefault(ev.shard_for(d), []).append(ev.encode_line(d))
        opened: list[tuple[str, int, bool, int]] = []
        try:
            for shard, lines in by_shard.items():
                opened.append((shard, *self._write_lines(shard, b"".join(lines))))
            fds = [fd for _, fd, _, _ in opened]
            if len(fds) == 1:
                os.fsync(fds[0])
            else:
                list(_fsync_pool().map(os.fsync, fds))
        except BaseException:
            for shard, fd, _, size in opened:
                self._undo(shard, fd, size)
            raise
        finally:
            for _, fd, _, _ in opened:
                os.close(fd)
        for shard, _, created, _ in opened:
            self._needs_newline[shard] = False
            if created:
                _fsync_dir(self.path(shard).parent)
        return list(by_shard)

    def append_lines(self, shard: str, lines: list[bytes]) -> None:
        """Durably append ready-made lines (each ending with a newline) to one file: seals.

        Undone like a failed batch if the write or the fsync fails.
        """
        fd, created, size = self._write_lines(shard, b"".join(lines))
        try:
            os.fsync(fd)
        except BaseException:
            self._undo(shard, fd, size)
            raise
        finally:
            os.close(fd)
        self._needs_newline[shard] = False
        if created:
            _fsync_dir(self.path(shard).parent)

    def _undo(self, shard: str, fd: int, size: int) -> None:
        """Cut a shard back to ``size`` (its length before a failed batch); retried on the next append."""
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
            self._truncate_to.pop(shard, None)
        except OSError as exc:
            log.warning("cannot undo a failed append to %s yet (%s); retrying before the next one", shard, exc)
            self._truncate_to[shard] = size

    def _write_lines(self, shard: str, payload: bytes) -> tuple[int, bool, int]:
        """Write (not yet fsync) a payload at the end of a shard; returns the open fd and its size before."""
        path = self.path(shard)
        created = not path.exists()
        if created:
            path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent.is_symlink():
            raise ValueError(f"refusing to append to {shard}: {path.parent.name}/ is a symlink")
        # read-write, not write-only: _ends_torn preads the last byte of an existing shard
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
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
        """Call after shard files were replaced underneath (sync merge)."""
        self._needs_newline.clear()
        self._truncate_to.clear()

    # ------------------------------------------------------------------ reading
    def read_all(self) -> ReadResult:
        return self.read_new({})

    def read_new(self, positions: dict[str, Position]) -> ReadResult:
        """Events appended since ``positions`` (all events for unknown shards)."""
        result = ReadResult()
        for shard in self.shards():
            self.read_shard(shard, positions.get(shard, Position()), result)
        return result

    def read_shard(self, shard: str, pos: Position, result: ReadResult, *,
                   max_bytes: int | None = None) -> bool:
        """Read the complete lines of one shard after ``pos`` into ``result``.

        With ``max_bytes``, read about that much (always whole lines, at least one)
        and leave the rest for the next call. Returns True when the end of the shard
        was reached (then an incomplete last line is reported as torn).
        """
        try:
            f = _open_read(self.path(shard))
        except FileNotFoundError:
            return True
        with f:
            size = os.fstat(f.fileno()).st_size
            start = pos.offset
            if start:
                if start > size:
                    start = 0
                else:
                    lo = max(0, start - TAIL_BYTES)
                    f.seek(lo)
                    if _tail_digest(f.read(start - lo)) != pos.tail:
                        log.info("%s changed under its stored position; reading it again", shard)
                        start = 0
            if start == size:
                result.positions[shard] = pos if start else Position()
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
                    data = data[:data.rfind(b"\n") + 1]
            end = parse_lines(shard, data, start, result, at_end=at_end)
            if end == start:
                result.positions[shard] = pos if start else Position()
                return at_end
            rel_end = end - start
            tail_src = data[max(0, rel_end - TAIL_BYTES):rel_end]
            if len(tail_src) < TAIL_BYTES and start > 0:
                lo = max(0, end - TAIL_BYTES)
                f.seek(lo)
                tail_src = f.read(end - lo)
        result.positions[shard] = Position(end, _tail_digest(tail_src))
        return at_end

    def position_at_end(self, shard: str) -> Position:
        """The position just past the last complete line of a shard as it is now."""
        try:
            with _open_read(self.path(shard)) as f:
                data = f.read()
        except FileNotFoundError:
            return Position()
        end = data.rfind(b"\n") + 1
        return Position(end, _tail_digest(data[:end])) if end else Position()

    def iter_lines(self, shard: str) -> Iterator[bytes]:
        """Raw lines of a shard (for tools and tests)."""
        try:
            f = _open_read(self.path(shard))
        except FileNotFoundError:
            return
        with f:
            yield from f


def _open_read(path: Path):
    """Open a shard for reading, refusing symlinks (the worktree is untrusted input)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    return os.fdopen(fd, "rb")


_POOL = None
_POOL_LOCK = threading.Lock()


def _fsync_pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="thrum-fsync")
        return _POOL


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

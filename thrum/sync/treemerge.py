"""Merge a remote tree's log files into the worktree, in bounded chunks.

Rules:

1. Only the log paths whose log file differs between our tree and the remote's
   (`trees.LayoutTrees.changes`) are read and merged, each with the current
   worktree file, which may hold appends not committed yet (`merge.py`: the fast
   path when one side only appended, else the full merge, with ``prefer``).
2. The work runs in chunks of at most `CHUNK_FILES` files and about `CHUNK_BYTES`
   bytes. The log's lock (`LogAccess.locked`) is held only while a chunk reads the
   local files, merges them and hands the results and the lines they brought to the
   log's owner (`LogAccess.apply_remote`); remote blobs are read before, new blobs
   hashed after, so a send waits for one chunk at most, whatever the size of the sync.
3. The owner writes a chunk's files with one fsync round, never through a link; a
   file the merge leaves as it is, is not written. What a chunk received is handed
   over with it and not kept: a sync holds one chunk's lines at a time.
4. A deleted local file is restored from our tree, never deleted (the log is
   append-only); a remote that dropped or replaced a log file gets ours back.
5. Per path, a `KeyCache` keeps the key summary of the bytes a merge left, so the
   next merge parses only the lines appended since (checked by one SHA-1).
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from . import SyncError
from .gitstore.api import FileMode, GitStore, Kind, ObjectWriter, Oid
from .logaccess import LogAccess
from .merge.shard import MergeResult, Prefer, ShardKeys, merge_shard_fast, merge_shard_keyed
from .trees import Change, LayoutTrees, Leaf

__all__ = ["CHUNK_BYTES", "CHUNK_FILES", "KeyCache", "MergeOutcome", "TreeMerge", "lines_ahead"]

CHUNK_FILES = 256
CHUNK_BYTES = 4 * 2**20
WORKERS = max(1, min(4, os.cpu_count() or 1))  # reading, inflating, hashing: the GIL is let go


@dataclass
class MergeOutcome:
    """What a merge did: lines received (new to us) and sent (new to the remote), counted."""

    head: Oid | None = None
    received: int = 0
    sent: int = 0
    commits: int = 0
    fast_forward: bool = False  # the ref moved to the remote tip, no commit needed
    ahead: bool = False  # we already contain the remote tip: nothing to merge
    written: int = 0  # worktree files replaced
    ignored: dict[str, int] = field(default_factory=dict)  # entries of the merged tree thrum ignores


@dataclass
class _Merged:
    path: str
    data: bytes
    remote: Leaf | None
    remote_bytes: bytes
    keys: ShardKeys | None
    stat: os.stat_result | None = None


class TreeMerge:
    """One merge of a remote tree into the worktree (see the module rules)."""

    def __init__(
        self,
        store: GitStore,
        odb: ObjectWriter,
        log: LogAccess,
        keys: "KeyCache",
        prefer: Prefer | None = None,
    ):
        self.store = store
        self.odb = odb  # where merged blobs go (the step's `ObjectBatch`)
        self.log = log
        self.keys = keys
        self.prefer = prefer

    def run(
        self, changes: list[Change], sizes: Callable[[bytes], int]
    ) -> tuple[MergeOutcome, dict[str, Leaf], dict[str, os.stat_result]]:
        """Merge ``changes``; (totals, the log files of the merged tree that changed, their stats)."""
        total = MergeOutcome()
        files: dict[str, Leaf] = {}
        stats: dict[str, os.stat_result] = {}
        with ThreadPoolExecutor(WORKERS) as pool:
            for chunk in _chunks(changes, sizes):
                merged = self._chunk(chunk, pool, total)
                for m in merged:  # outside the lock: hashing and compressing new blobs
                    if m.remote is not None and (m.data is m.remote_bytes or m.data == m.remote_bytes):
                        leaf = m.remote
                    else:
                        leaf = Leaf(self.odb.write(Kind.BLOB, m.data), int(FileMode.BLOB))
                    files[m.path] = leaf
                    if m.keys is not None:
                        self.keys.store(m.path, leaf.oid, m.keys)
                    if m.stat is not None:
                        stats[m.path] = m.stat
        return total, files, stats

    def _chunk(self, chunk: list[Change], pool: ThreadPoolExecutor, total: MergeOutcome) -> list[_Merged]:
        # the store, on this thread (pygit2's handles are not shared between threads)
        remote = [self.store.read(c.new.oid)[1] if c.new else b"" for c in chunk]
        merged: list[_Merged] = []
        with self.log.locked():
            candidates = [self.keys.candidate(c.path) for c in chunk]
            locals_ = list(pool.map(self._read_local, chunk, candidates))
            writes: list[tuple[str, bytes]] = []
            received: dict[str, list[bytes]] = {}
            for c, theirs, (found, known_ok) in zip(chunk, remote, locals_):
                exists = found is not None
                if found is not None:
                    local = found[0]
                else:  # restored from our tree, never deleted (the log is append-only)
                    local = self.store.read(c.old.oid)[1] if c.old is not None else b""
                known = self.keys.take(c.path) if known_ok else None
                if not known_ok:
                    self.keys.drop(c.path)
                result, keys = self._merge(theirs, local, known)
                if result.received:
                    received[c.path] = result.received
                    total.received += len(result.received)
                total.sent += len(result.sent)
                if c.new is None and not result.data and not exists:
                    continue
                m = _Merged(c.path, result.data, c.new, theirs, keys, found[1] if found is not None else None)
                merged.append(m)
                if not exists or not (result.data is local or result.data == local):
                    writes.append((c.path, result.data))
            if writes or received:
                written = self.log.apply_remote(writes, received)
                by_path = dict(zip((p for p, _ in writes), written))
                for m in merged:
                    m.stat = by_path.get(m.path, m.stat)
                total.written += len(writes)
        return merged

    def _read_local(
        self, change: Change, candidate: tuple[bytes, int] | None
    ) -> tuple[tuple[bytes, os.stat_result] | None, bool]:
        """Worker thread, no pygit2: the file and its stat (never through a link), and whether
        the path's key summary still describes the file's first bytes."""
        try:
            found = self.log.read(change.path)
        except OSError as exc:
            raise SyncError(f"cannot merge {change.path}: {exc.strerror or exc}") from None
        known_ok = False
        if candidate is not None and found is not None:
            oid_raw, n = candidate
            known_ok = starts_with_blob(found[0], n, oid_raw)
        return found, known_ok

    def _merge(self, remote: bytes, local: bytes, known: ShardKeys | None) -> tuple[MergeResult, ShardKeys]:
        fast = merge_shard_fast(remote, local, known)
        if fast is not None:
            return fast
        return merge_shard_keyed(remote, local, self.prefer)


def _chunks(changes: list[Change], sizes: Callable[[bytes], int]) -> Iterator[list[Change]]:
    chunk: list[Change] = []
    size = 0
    for c in changes:
        chunk.append(c)
        size += sizes(c.new.oid.raw) if c.new is not None else 0
        if len(chunk) >= CHUNK_FILES or size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def lines_ahead(trees: LayoutTrees, log: LogAccess, remote_tree: Oid, local_tree: Oid) -> int:
    """Lines our tree adds over the remote's, for the report (reads only file tails)."""
    total = 0
    for change in trees.changes(remote_tree, local_tree):
        ours = trees.size(change.new.oid.raw) if change.new else 0
        theirs = trees.size(change.old.oid.raw) if change.old else 0
        if ours <= theirs:
            continue
        try:
            found = log.read(change.path)
        except OSError:
            continue
        if found is not None:
            total += found[0][theirs:ours].count(b"\n")
    return total


def starts_with_blob(data: bytes, n: int, oid_raw: bytes) -> bool:
    """True when the first ``n`` bytes of ``data`` are a whole-line blob with id ``oid_raw``."""
    if n > len(data) or (n and data[n - 1 : n] != b"\n"):
        return False
    h = hashlib.sha1(b"blob %d\0" % n)
    h.update(memoryview(data)[:n])
    return h.digest() == oid_raw


class KeyCache:
    """Per path: the :class:`ShardKeys` of the bytes a merge left, by their blob id.

    A later merge of that path checks that the file still starts with those bytes
    (one SHA-1 over them, no parsing) and then parses only what was appended since.
    Bounded by the number of keys held (8 bytes each), least recently used first out.
    """

    def __init__(self, max_keys: int = 4_000_000):
        self.max_keys = max_keys
        self._items: OrderedDict[str, tuple[bytes, ShardKeys]] = OrderedDict()
        self._total = 0

    def candidate(self, path: str) -> tuple[bytes, int] | None:
        """(blob id, size) of the bytes the summary of ``path`` describes, if any."""
        item = self._items.get(path)
        return None if item is None else (item[0], item[1].size)

    def take(self, path: str) -> ShardKeys | None:
        """The summary of ``path``, once the caller checked it still applies."""
        item = self._items.get(path)
        if item is None:
            return None
        self._items.move_to_end(path)
        return item[1]

    def drop(self, path: str) -> None:
        """Forget the summary of ``path`` (it no longer describes the file)."""
        item = self._items.pop(path, None)
        if item is not None:
            self._total -= len(item[1])

    def store(self, path: str, oid: Oid, keys: ShardKeys) -> None:
        self.drop(path)
        if not keys.clean:
            return
        self._items[path] = (oid.raw, keys)
        self._total += len(keys)
        while self._total > self.max_keys and self._items:
            self.drop(next(iter(self._items)))

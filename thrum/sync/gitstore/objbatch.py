"""The new objects of one sync step, written as one pack instead of a file each.

A sync adds tens of objects to a store: a blob per touched log file, the trees
above them, a commit.
Written loose, each is a file created (libgit2: a temporary file, a link, an
unlink), and creating files is what a filesystem under steady create/delete churn
does slowly: 15 loose objects took 15-45 ms on a churned ext4, one pack of them
with its index 2.4 ms, fsyncs included (docs/design/decisions.md). git's geometric
repack (`thrum.sync.maintenance`) rolls the small packs up, so a store still holds few.

Rules:

1. Objects are hashed as they are added (or taken with the id a caller verified)
   and held in memory until `flush`, which the caller runs before it moves a ref
   to them. A batch never flushed writes nothing (a commit that changed nothing).
2. More than `MAX_BUFFERED` bytes waiting (a big merge) are flushed as a pack of
   their own, so memory stays bounded. Callers add children before parents, so a
   pack never holds an object whose descendants are not stored yet.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .api import Kind, Oid, Signature, commit_object, object_id
from .packfile import write_plain_pack

__all__ = ["MAX_BUFFERED", "ObjectBatch"]

MAX_BUFFERED = 32 << 20
_PARALLEL_BYTES = 1 << 20  # below this, compressing on one thread beats handing work over


class ObjectBatch:
    """Objects on their way into the store at ``objects`` (an ``objects`` directory).

    An `api.WriteBatch` (what `libgit2.LibGit2Store.batch` returns). Not thread-safe:
    one per sync step, on the step's thread.
    """

    def __init__(self, objects: Path, max_buffered: int | None = None) -> None:
        self.objects = objects
        self.max_buffered = MAX_BUFFERED if max_buffered is None else max_buffered
        self._waiting: dict[bytes, tuple[int, bytes]] = {}
        self._bytes = 0

    def write(self, kind: int, data: bytes) -> Oid:
        oid = object_id(kind, data)
        self.add(oid, kind, data)
        return oid

    def add(self, oid: Oid, kind: int, data: bytes) -> None:
        """Add an object whose id the caller computed or verified from ``data``."""
        if oid.raw in self._waiting:
            return
        self._waiting[oid.raw] = (int(kind), data)
        self._bytes += len(data)
        if self._bytes > self.max_buffered:
            self.flush()

    def __contains__(self, oid: Oid) -> bool:
        return oid.raw in self._waiting

    def get(self, oid: Oid) -> tuple[int, bytes] | None:
        """(type, bytes) of an object still waiting, else None (not added, or flushed)."""
        return self._waiting.get(oid.raw)

    def commit(self, tree: Oid, parents: list[Oid], sig: Signature, message: str) -> Oid:
        """A step's last object: its commit (author and committer ``sig``); then `flush`."""
        oid = self.write(Kind.COMMIT, commit_object(tree, parents, sig, message))
        self.flush()
        return oid

    def flush(self) -> str | None:
        """Write what waits as one pack; its name (None: nothing waited)."""
        if not self._waiting:
            return None
        items = [(raw, kind, data) for raw, (kind, data) in self._waiting.items()]
        if self._bytes >= _PARALLEL_BYTES:
            with ThreadPoolExecutor(2, thread_name_prefix="thrum-pack") as pool:
                name = write_plain_pack(self.objects, items, pool.map)
        else:
            name = write_plain_pack(self.objects, items)
        self._waiting.clear()
        self._bytes = 0
        return name

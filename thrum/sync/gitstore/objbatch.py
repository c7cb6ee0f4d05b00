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

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pygit2
from pygit2.enums import ObjectType

from .gitlib import commit_object
from .packfile import write_plain_pack

__all__ = ["MAX_BUFFERED", "ObjectBatch", "object_id"]

MAX_BUFFERED = 32 << 20
_PARALLEL_BYTES = 1 << 20  # below this, compressing on one thread beats handing work over
_TYPE_NAMES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}


def object_id(kind: int, data: bytes) -> pygit2.Oid:
    """The id git gives an object of type ``kind`` (1-4) holding ``data``."""
    digest = hashlib.sha1(b"%s %d\0" % (_TYPE_NAMES[int(kind)], len(data)))
    digest.update(data)
    return pygit2.Oid(raw=digest.digest())


class ObjectBatch:
    """Objects on their way into the store at ``objects`` (an ``objects`` directory).

    ``write`` has the signature of ``pygit2.Odb.write``, so tree and blob writers take
    either. Not thread-safe: one per sync step, on the step's thread.
    """

    def __init__(self, objects: Path, max_buffered: int | None = None):
        self.objects = objects
        self.max_buffered = MAX_BUFFERED if max_buffered is None else max_buffered
        self._waiting: dict[bytes, tuple[int, bytes]] = {}
        self._bytes = 0

    def write(self, kind: int, data: bytes) -> pygit2.Oid:
        oid = object_id(kind, data)
        self.add(oid, kind, data)
        return oid

    def add(self, oid: pygit2.Oid, kind: int, data: bytes) -> None:
        """Add an object whose id the caller computed or verified from ``data``."""
        if oid.raw in self._waiting:
            return
        self._waiting[oid.raw] = (int(kind), data)
        self._bytes += len(data)
        if self._bytes > self.max_buffered:
            self.flush()

    def __contains__(self, oid: pygit2.Oid) -> bool:
        return oid.raw in self._waiting

    def get(self, oid: pygit2.Oid) -> tuple[int, bytes] | None:
        """(type, bytes) of an object still waiting, else None (not added, or flushed)."""
        return self._waiting.get(oid.raw)

    def commit(self, tree: pygit2.Oid, parents: list[pygit2.Oid], sig: pygit2.Signature, message: str) -> pygit2.Oid:
        """A step's last object: its commit (author and committer ``sig``); then `flush`."""
        oid = self.write(ObjectType.COMMIT, commit_object(tree, parents, sig, message))
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

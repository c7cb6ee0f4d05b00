"""Fetch and push with a remote that is a repository on a local filesystem.

libgit2's transport for a path remote builds a pack (zlib level 6 over every new
blob, plus a delta search), then indexes it on the other side: for an append-only
shard of several MB that costs hundreds of milliseconds per touched shard. Both
repositories are plain directories here, so objects are copied directly instead:

1. Objects are copied children first (blobs, then trees, then commits, parents
   before children), so an interrupted copy never leaves an object whose
   descendants are missing; "the destination has this object" therefore implies
   it has everything reachable from it, and the walk stops there.
2. The copied objects are written into the destination as one pack (`objbatch`,
   which flushes a big copy in parts, children first), never a file each: creating
   files is most of a small sync's cost. Objects coming from the remote are
   verified first (a loose one inflated, its header checked and its SHA-1 compared
   with the name; a packed one read through libgit2 and hashed); the inflated blob
   bytes are handed to the merge, so a fetched blob is read once. A fetch never
   shares a file with the remote: its owner cannot change what we checked.
3. A push writes the objects, then moves the remote branch with a compare-and-swap
   on libgit2's ref lock: it fails (a race, retried by the caller) when the remote
   moved since our fetch, exactly like a non-fast-forward push.

What this does not do, like libgit2's own local transport: run hooks. A remote
that is not a bare repository, a relative path, or a SHA-256 repository goes
through libgit2's transport as before.
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.parse
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, ObjectType, RepositoryOpenFlag

from . import SyncError
from .gitstore.gitlib import TreeEntries, objects_dir, parse_tree
from .gitstore.objbatch import ObjectBatch, object_id
from .remotefiles import MAX_OBJECT_BYTES, read_loose, refuse_special, refuse_special_files, too_large, verified_blob

log = logging.getLogger(__name__)

__all__ = [
    "CopyStats",
    "FetchedBlobs",
    "LocalRemote",
    "local_remote_path",
    "open_local_remote",
]


def local_remote_path(url: str | None) -> Path | None:
    """The directory of a remote given as an absolute path or a ``file://`` URL, else None."""
    if not url:
        return None
    if url.startswith("file://"):
        rest = url[len("file://") :]
        if rest.startswith("localhost/"):
            rest = rest[len("localhost") :]
        if not rest.startswith("/"):
            return None  # file://host/path: another machine's path
        path = urllib.parse.unquote(rest)
    elif "://" in url or not os.path.isabs(url):
        return None
    else:
        path = url
    p = Path(path)
    return p if p.is_dir() else None


def open_local_remote(url: str | None) -> "LocalRemote | None":
    """A :class:`LocalRemote` for ``url`` when direct copying applies, else None."""
    path = local_remote_path(url)
    if path is None:
        return None
    refuse_special_files(path)
    try:
        repo = pygit2.Repository(str(path), RepositoryOpenFlag.NO_SEARCH)
    except (pygit2.GitError, KeyError, ValueError, OSError):
        return None  # not a repository: libgit2's transport gives the usual error
    try:
        fmt = repo.config["extensions.objectformat"]
    except (KeyError, ValueError, pygit2.GitError):
        fmt = "sha1"
    if str(fmt).lower() != "sha1":
        return None
    return LocalRemote(repo)


@dataclass
class CopyStats:
    """What one copy did. ``blobs`` maps blob oid (hex) to its checked bytes, as many as
    the copy was asked to keep."""

    objects: int = 0
    bytes: int = 0
    blobs: dict[str, bytes] = field(default_factory=dict)


_WORKERS = max(1, min(4, os.cpu_count() or 1))  # inflating and hashing release the GIL


class LocalRemote:
    """A repository on a local filesystem, used as a remote."""

    def __init__(self, repo: pygit2.Repository):
        self.repo = repo
        self.objects = objects_dir(repo)

    def __enter__(self) -> "LocalRemote":
        return self

    def __exit__(self, *exc) -> None:
        # Let go of the store's packs now: consolidation deletes them, and a pygit2
        # handle (a reference cycle) would keep them open until a full collection.
        self.repo.free()

    @property
    def bare(self) -> bool:
        return self.repo.is_bare

    def tip(self, refname: str) -> pygit2.Oid | None:
        ref = self.repo.references.get(refname)
        if ref is None:
            return None
        try:
            return ref.resolve().target
        except (KeyError, pygit2.GitError):
            return None

    def fetch_into(self, dst: pygit2.Repository, tip: pygit2.Oid, keep_bytes: int = 0) -> CopyStats:
        """Copy everything reachable from ``tip`` that ``dst`` lacks, verifying it.

        Up to ``keep_bytes`` of inflated blob content is returned in the stats.
        """
        return _Copier(self.repo, self.objects, dst, objects_dir(dst), verify=True, keep_bytes=keep_bytes).commit_graph(
            tip
        )

    def push_from(self, src: pygit2.Repository, refname: str, new: pygit2.Oid, expected: pygit2.Oid | None) -> bool:
        """Copy ``new`` and its history into the remote, then move ``refname`` from
        ``expected`` (None: it must not exist) to ``new``. False when the remote's
        ref is no longer ``expected`` (someone pushed first)."""
        current = self.tip(refname)
        if current != expected:
            return False
        _Copier(src, objects_dir(src), self.repo, self.objects, verify=False).commit_graph(new)
        try:
            if expected is None:
                self.repo.create_reference_direct(refname, new, False, message="thrum: push a-sync")
            else:
                ref = self.repo.references.get(refname)
                if ref is None or ref.target != expected:
                    return False
                ref.set_target(new, "thrum: push a-sync")  # compare-and-swap under the ref lock
        except pygit2.AlreadyExistsError:
            return False
        except pygit2.GitError as exc:
            low = str(exc).lower()
            if "old reference value does not match" in low or "lock" in low:
                return False
            raise
        return True


class _Copier:
    def __init__(self, src, src_objects: Path, dst, dst_objects: Path, *, verify: bool, keep_bytes: int = 0):
        self.src, self.dst = src, dst
        self.src_objects = src_objects
        self.verify = verify
        self.keep_left = keep_bytes
        self._budget = threading.Lock()
        self.stats = CopyStats()
        self.dst_odb = dst.odb
        self.batch = ObjectBatch(dst_objects)  # rule 2: one pack per copy
        self.done: set[pygit2.Oid] = set()
        self._pool: ThreadPoolExecutor | None = None  # one per copy: a thread start costs a GIL hand-over

    def has(self, oid: pygit2.Oid) -> bool:
        return oid in self.done or self.dst_odb.exists(oid)

    def commit_graph(self, tip: pygit2.Oid) -> CopyStats:
        try:
            self._walk(tip)
            self.batch.flush()
        finally:
            if self._pool is not None:
                self._pool.shutdown()
        return self.stats

    def _walk(self, tip: pygit2.Oid) -> None:
        stack: list[tuple[pygit2.Oid, pygit2.Commit | None]] = [(tip, None)]
        while stack:
            oid, expanded = stack.pop()
            if expanded is not None:
                self.tree(expanded.tree_id, self._parent_tree(expanded))
                self.small(oid)
                continue
            if self.has(oid):
                continue
            self._guard(oid)
            commit = self.src[oid]
            if not isinstance(commit, pygit2.Commit):
                raise SyncError(f"remote object {oid} is not a commit")
            stack.append((oid, commit))
            stack.extend((p, None) for p in commit.parent_ids if not self.has(p))

    def _dst_object(self, oid: pygit2.Oid) -> tuple[int, bytes] | None:
        """(type, bytes) of an object the destination has or is about to get, else None."""
        found = self.batch.get(oid)
        if found is not None:
            return found
        try:
            kind, data = self.dst_odb.read(oid)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return int(kind), data

    def _parent_tree(self, commit: pygit2.Commit) -> pygit2.Oid | None:
        """The tree of the commit's first parent, which the destination has by now (parents
        are copied first): where the new tree's unchanged entries are found."""
        if not commit.parent_ids:
            return None
        found = self._dst_object(commit.parent_ids[0])
        if found is None or found[0] != ObjectType.COMMIT or not found[1].startswith(b"tree "):
            return None
        return pygit2.Oid(hex=found[1][5:45].decode("ascii", "replace"))

    def tree(self, root: pygit2.Oid, known: pygit2.Oid | None = None) -> None:
        """Copy a tree and what it holds that the destination lacks. ``known``: the
        destination's tree at the same path in the parent commit. An entry with the same
        name and id there is in the destination already (rule 1), so only the entries a
        commit changed are looked up, however many files a directory holds."""
        stack: list[tuple[pygit2.Oid, pygit2.Oid | None, bool]] = [(root, known, False)]
        while stack:
            oid, known, expanded = stack.pop()
            if expanded:
                self.small(oid)
                continue
            if self.has(oid):
                continue
            self._guard(oid)
            tree = self.src[oid]
            if not isinstance(tree, pygit2.Tree):
                raise SyncError(f"remote object {oid} is not a tree")
            stack.append((oid, None, True))
            theirs = self._known_entries(known)
            blobs = []
            for entry in tree:
                mode = entry.filemode
                if mode == FileMode.COMMIT:  # a submodule link: not an object here
                    continue
                same = theirs.get(entry.raw_name)
                if same is not None and same[1] == entry.id.raw:
                    continue
                if mode == FileMode.TREE:
                    if not self.has(entry.id):
                        inner = pygit2.Oid(raw=same[1]) if same is not None and same[0] == FileMode.TREE else None
                        stack.append((entry.id, inner, False))
                elif not self.has(entry.id):
                    blobs.append(entry.id)
            self.blobs(blobs)  # before the tree itself is written

    def _known_entries(self, known: pygit2.Oid | None) -> TreeEntries:
        found = self._dst_object(known) if known is not None else None
        if found is None or found[0] != ObjectType.TREE:
            return {}
        return parse_tree(found[1])

    def _map(self, fn: Callable, items: Iterable, n: int) -> list:
        if _WORKERS == 1 or n < 2:  # a small sync starts no thread
            return [fn(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="thrum-copy")
        return list(self._pool.map(fn, items))

    def blobs(self, oids: list[pygit2.Oid]) -> None:
        oids = list(dict.fromkeys(oids))
        if self.verify:  # the remote's loose blobs are inflated and checked by the workers
            results = self._map(self._verified_loose, oids, len(oids))
            packed = [oid for oid, data in results if data is None]
            results = [r for r in results if r[1] is not None]
            if packed:  # libgit2 inflates each on this thread; the workers hash them
                reads = ((oid, self._read_blob(oid)) for oid in packed)  # read while the workers hash
                results += self._map(_checked, reads, len(packed))
        else:  # our own store
            results = [(oid, self._read_blob(oid)) for oid in oids]
        for oid, data in results:
            self.batch.add(oid, ObjectType.BLOB, data)
            self.stats.bytes += len(data)
            if self.verify and self._reserve(len(data)):  # else the merge reads it again
                self.stats.blobs[str(oid)] = data
            self.done.add(oid)
            self.stats.objects += 1

    def _guard(self, oid: pygit2.Oid) -> None:
        """Before libgit2 reads one of the remote's objects: not a planted FIFO or device at
        its loose path (as `read_loose` refuses), and not larger than `MAX_OBJECT_BYTES`."""
        if not self.verify:
            return
        hexs = str(oid)
        refuse_special(self.src_objects / hexs[:2] / hexs[2:])
        try:
            size = self.src.odb.read_header(oid)[1]
        except (KeyError, ValueError, pygit2.GitError) as exc:
            raise SyncError(f"the remote's object {oid} cannot be read: {exc}") from None
        if size > MAX_OBJECT_BYTES:
            raise too_large(oid)

    def _read_blob(self, oid: pygit2.Oid) -> bytes:
        self._guard(oid)
        kind, data = self.src.odb.read(oid)
        if kind != ObjectType.BLOB:
            raise SyncError(f"remote object {oid} is not a blob")
        return data

    def _verified_loose(self, oid: pygit2.Oid) -> tuple[pygit2.Oid, bytes | None]:
        """Worker thread, no pygit2: the bytes of one of the remote's loose blobs, checked
        against its id; None when it is not loose."""
        raw = read_loose(self.src_objects, oid)
        return oid, None if raw is None else verified_blob(oid, raw)

    def _reserve(self, n: int) -> bool:
        with self._budget:
            if n <= self.keep_left:
                self.keep_left -= n
                return True
            return False

    def small(self, oid: pygit2.Oid) -> None:
        """Copy a commit or tree (parsed by libgit2 on the way, and hashed here)."""
        if self.has(oid):
            return
        kind, data = self.src.odb.read(oid)
        if object_id(kind, data) != oid:
            raise SyncError(f"object {oid} read back as something else: the remote's object store is corrupt")
        self.batch.add(oid, kind, data)
        self.stats.bytes += len(data)
        self.done.add(oid)
        self.stats.objects += 1


def _checked(item: tuple[pygit2.Oid, bytes]) -> tuple[pygit2.Oid, bytes]:
    """Worker thread: a blob libgit2 read from a pack, after checking it hashes to its id."""
    oid, data = item
    if object_id(ObjectType.BLOB, data) != oid:
        raise SyncError(f"object {oid} read back as something else: the remote's object store is corrupt")
    return item


class FetchedBlobs:
    """Blob bytes as the last direct fetch inflated and checked them, each handed over once.

    `read` runs in worker threads (no pygit2): the merge reads remote blobs with it, and
    asks libgit2 (on its own thread) when it returns None (a blob the fetch did not keep).
    """

    def __init__(self, blobs: dict[str, bytes] | None = None):
        self.blobs = dict(blobs or {})  # hex -> bytes

    def read(self, oid: pygit2.Oid) -> bytes | None:
        return self.blobs.pop(str(oid), None)

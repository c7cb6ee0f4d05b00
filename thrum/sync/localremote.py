"""Fetch and push with a remote that is a repository on a local filesystem.

libgit2's transport for a path remote builds a pack (zlib level 6 over every new
blob, plus a delta search), then indexes it on the other side: for an append-only
shard of several MB that costs hundreds of milliseconds per touched shard. Both
repositories are plain directories here, so objects are copied directly instead:

1. Objects are copied children first (blobs, then trees, then commits, parents
   before children), so an interrupted copy never leaves an object whose
   descendants are missing; "the destination has this object" therefore implies
   it has everything reachable from it, and the walk stops there.
2. A loose object is copied as its compressed file, never recompressed. Objects
   coming from the remote are verified first (inflated, header checked, SHA-1
   compared with the name); the inflated blob bytes are handed to the merge, so
   a fetched blob is read once. Objects that are only packed go through libgit2's
   object database (which verifies them too).
3. A push writes the objects, then moves the remote branch with a compare-and-swap
   on libgit2's ref lock: it fails (a race, retried by the caller) when the remote
   moved since our fetch, exactly like a non-fast-forward push.

What this does not do, like libgit2's own local transport: run hooks. A remote
that is not a bare repository, a relative path, or a SHA-256 repository goes
through libgit2's transport as before.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import threading
import urllib.parse
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, ObjectType, RepositoryOpenFlag

from . import SyncError
from .gitlib import TreeEntries, objects_dir, read_tree

log = logging.getLogger(__name__)

__all__ = ["CopyStats", "FetchedBlobs", "LocalRemote", "local_remote_path", "objects_dir", "open_local_remote"]


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
    """What one copy did. ``blobs`` maps blob oid (hex) to its bytes when they were inflated;
    ``verified`` names every blob checked on the way (kept or not)."""

    objects: int = 0
    bytes: int = 0
    blobs: dict[str, bytes] = field(default_factory=dict)
    verified: set[str] = field(default_factory=set)


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
        self.src_objects, self.dst_objects = src_objects, dst_objects
        self.verify = verify
        self.keep_left = keep_bytes
        self._budget = threading.Lock()
        self.stats = CopyStats()
        self.dst_odb = dst.odb
        self.done: set[pygit2.Oid] = set()
        self._pool: ThreadPoolExecutor | None = None  # one per copy: a thread start costs a GIL hand-over

    def has(self, oid: pygit2.Oid) -> bool:
        return oid in self.done or self.dst_odb.exists(oid)

    def commit_graph(self, tip: pygit2.Oid) -> CopyStats:
        try:
            self._walk(tip)
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
            commit = self.src[oid]
            if not isinstance(commit, pygit2.Commit):
                raise SyncError(f"remote object {oid} is not a commit")
            stack.append((oid, commit))
            stack.extend((p, None) for p in commit.parent_ids if not self.has(p))

    def _parent_tree(self, commit: pygit2.Commit) -> pygit2.Oid | None:
        """The tree of the commit's first parent, which the destination has by now (parents
        are copied first): where the new tree's unchanged entries are found."""
        if not commit.parent_ids:
            return None
        try:
            parent = self.dst[commit.parent_ids[0]]
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return parent.tree_id if isinstance(parent, pygit2.Commit) else None

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
        if known is None:
            return {}
        try:
            return read_tree(self.dst, known)
        except (KeyError, ValueError, pygit2.GitError):
            return {}

    def _map(self, fn: Callable, items: Iterable, n: int) -> list:
        if _WORKERS == 1 or n < 2:  # a small sync starts no thread
            return [fn(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="thrum-copy")
        return list(self._pool.map(fn, items))

    def blobs(self, oids: list[pygit2.Oid]) -> None:
        oids = list(dict.fromkeys(oids))
        results = self._map(self._copy_blob_file, oids, len(oids))
        packed = [oid for oid, size, _ in results if size is None]
        if packed:  # libgit2 inflates each on this thread; compressing, hashing, writing go to the workers
            reads = ((oid, self._read_blob(oid)) for oid in packed)  # read while the workers write
            results += self._map(self._write_packed_blob, reads, len(packed))
        for oid, size, data in results:
            if size is None:
                continue
            self.stats.bytes += size
            if self.verify:
                self.stats.verified.add(str(oid))
            if data is not None:
                self.stats.blobs[str(oid)] = data
            self._check_written(oid)

    def _read_blob(self, oid: pygit2.Oid) -> bytes:
        kind, data = self.src.odb.read(oid)
        if kind != ObjectType.BLOB:
            raise SyncError(f"remote object {oid} is not a blob")
        return data

    def _write_packed_blob(self, item: tuple[pygit2.Oid, bytes]) -> tuple[pygit2.Oid, int, bytes | None]:
        """Worker thread, no pygit2: write a blob read from a pack as a loose object, after
        checking it hashes to its id. (oid, size, bytes kept or None)."""
        oid, data = item
        whole = b"blob %d\0" % len(data) + data
        if hashlib.sha1(whole).digest() != oid.raw:
            raise SyncError(f"object {oid} read back as something else: the remote's object store is corrupt")
        _write_loose_file(self.dst_objects, str(oid), zlib.compress(whole, 1))
        return oid, len(data), data if self._reserve(len(data)) else None

    def _copy_blob_file(self, oid: pygit2.Oid) -> tuple[pygit2.Oid, int | None, bytes | None]:
        """Worker thread, no pygit2: copy one loose blob file, verified when it comes from
        the remote. (oid, compressed size or None when it is not loose, bytes kept or None)."""
        if not self.verify:
            return oid, self._place_own(oid), None
        raw = self._loose(oid)
        if raw is None:
            return oid, None, None
        data = _verified_blob(oid, raw)
        _write_loose_file(self.dst_objects, str(oid), raw)
        return oid, len(raw), data if self._reserve(len(data)) else None  # else the merge inflates it again

    def _reserve(self, n: int) -> bool:
        with self._budget:
            if n <= self.keep_left:
                self.keep_left -= n
                return True
            return False

    def small(self, oid: pygit2.Oid) -> None:
        """Copy a commit or tree (already parsed by libgit2, so already verified)."""
        if self.has(oid):
            return
        size = None if self.verify else self._place_own(oid)
        if size is not None:
            self.stats.bytes += size
            return self._check_written(oid)
        kind, data = self.src.odb.read(oid)
        written = self.dst_odb.write(kind, data)
        if written != oid:
            raise SyncError(f"object {oid} read back as {written}: the remote's object store is corrupt")
        self.stats.bytes += len(data)
        self.done.add(oid)
        self.stats.objects += 1

    def _place_own(self, oid: pygit2.Oid) -> int | None:
        """A push (may run in a worker, no pygit2): put one of our loose objects in the
        remote, linked or else copied as its file. Its size; None when it is not loose."""
        hexs = str(oid)
        linked = _link_loose(self.src_objects, self.dst_objects, hexs)
        if linked is not None:
            return linked
        raw = self._loose(oid)
        if raw is None:
            return None
        _write_loose_file(self.dst_objects, hexs, raw)
        return len(raw)

    def _check_written(self, oid: pygit2.Oid) -> None:
        if not self.dst_odb.exists(oid):  # an odb that keeps its objects elsewhere
            kind, data = self.src.odb.read(oid)
            self.dst_odb.write(kind, data)
        self.done.add(oid)
        self.stats.objects += 1

    def _loose(self, oid: pygit2.Oid) -> bytes | None:
        hexs = str(oid)
        try:
            with open(self.src_objects / hexs[:2] / hexs[2:], "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError):
            return None


def _link_loose(src_objects: Path, dst_objects: Path, hexs: str) -> int | None:
    """Hard-link one of our own loose objects into a store on the same filesystem, as
    ``git clone --local`` does: one call instead of a temp file, a write and a rename
    (creating files is most of a push's cost). Only for a push: a fetch copies, so the
    remote's owner can never change an object in our store after it was verified.
    Its size; None when it cannot (not loose here, another filesystem, links refused)."""
    src, final = src_objects / hexs[:2] / hexs[2:], dst_objects / hexs[:2] / hexs[2:]
    try:
        size = src.stat().st_size
        final.parent.mkdir(exist_ok=True)
        os.link(src, final)
    except FileExistsError:  # there already (the caller checks that the destination sees it)
        pass
    except OSError:  # not loose here; EXDEV, EPERM (protected links), no links on this filesystem
        return None
    return size


def _write_loose_file(objects: Path, hexs: str, raw: bytes) -> None:
    """Write a loose object file the way git does: temp file in its folder, then rename."""
    folder = objects / hexs[:2]
    final = folder / hexs[2:]
    if final.exists():
        return
    folder.mkdir(exist_ok=True)
    tmp = folder / f"tmp_obj_thrum_{os.getpid()}_{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(tmp, final)


class FetchedBlobs:
    """Blob bytes as the last direct fetch inflated them, else read from our loose copy.

    `read` runs in worker threads (no pygit2): the merge reads remote blobs with it,
    and asks libgit2 (on its own thread) when it returns None (a packed blob).
    """

    def __init__(self, objects: Path, blobs: dict[str, bytes] | None = None, verified: set[str] | None = None):
        self.objects = objects
        self.blobs = dict(blobs or {})  # hex -> bytes, handed over once
        self.verified = set(verified or ())  # blobs the fetch checked (kept or not)

    def read(self, oid: pygit2.Oid) -> bytes | None:
        hexs = str(oid)
        data = self.blobs.pop(hexs, None)
        if data is not None:
            return data
        try:
            with open(self.objects / hexs[:2] / hexs[2:], "rb") as f:
                raw = f.read()
        except OSError:
            return None
        if hexs in self.verified:  # our copy of a blob the fetch just checked
            data = zlib.decompress(raw)
            return data[data.index(b"\0") + 1 :]
        try:
            return _verified_blob(oid, raw)
        except SyncError:
            return None  # let libgit2 say what is wrong with it


def _verified_blob(oid: pygit2.Oid, raw: bytes) -> bytes:
    """The content of loose blob ``raw`` after checking that it really is ``oid``."""
    try:
        data = zlib.decompress(raw)  # one call: it lets go of the GIL (decompressobj does not)
        ok = True
    except zlib.error:
        ok = False
    if ok:
        nul = data.find(b"\0", 0, 64)
        head = data[:nul].split(b" ") if nul > 0 else []
        ok = (
            len(head) == 2
            and head[0] == b"blob"
            and head[1].isdigit()
            and int(head[1]) == len(data) - nul - 1
            and hashlib.sha1(data).digest() == oid.raw
        )
    if not ok:
        raise SyncError(
            f"the remote's object {oid} is corrupt (it does not hash to its name); "
            f"run `git fsck` in the remote repository"
        )
    return data[nul + 1 :]

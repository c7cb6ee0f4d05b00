"""libgit2 specifics in one place: what pygit2 does not wrap (cffi) and how thrum tunes it.

Rules:

1. Every call into pygit2's cffi layer (``pygit2.ffi``) lives here, so a pygit2
   upgrade that moves them breaks one module, and each has a plain fallback.
2. Tuning that only thrum's own handles should see is set at the app level on that
   handle (an extra config file), never in the user's git config.
3. Trees are read and written as raw objects: parsing a tree object with one
   regular expression and writing one with ``odb.write`` cost a fraction of
   pygit2's per-entry objects and TreeBuilder on directories with tens of
   thousands of entries (a hostile remote can push those).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Protocol

import pygit2
from pygit2.enums import FileMode, ObjectType, RepositoryOpenFlag

log = logging.getLogger(__name__)

__all__ = [
    "EMPTY_TREE",
    "IndexStats",
    "OBJECT_CACHE_BYTES",
    "ZERO_OID",
    "PackWatch",
    "TreeEntries",
    "add_index_entry",
    "blob_size",
    "bound_object_cache",
    "commit_object",
    "objects_dir",
    "open_repo",
    "parse_tree",
    "read_tree",
    "tune_pack_building",
    "update_index",
    "write_tree",
]

ZERO_OID = pygit2.Oid(hex="0" * 40)
EMPTY_TREE = pygit2.Oid(hex="4b825dc642cb6eb9a060e54bf8d69288fbee4904")

TreeEntries = dict[bytes, tuple[int, bytes]]
"""A tree's entries: name (bytes) -> (file mode, raw 20-byte object id)."""


class ObjectWriter(Protocol):
    """Where new objects go: ``pygit2.Odb`` or `objbatch.ObjectBatch`."""

    def write(self, kind: int, data: bytes, /) -> pygit2.Oid: ...


_ENTRY = re.compile(rb"([0-7]{5,6}) ([^\0]+)\0(.{20})", re.S)


def open_repo(path: os.PathLike | str) -> pygit2.Repository:
    """A repository handle at exactly ``path`` (no search upwards)."""
    return pygit2.Repository(str(path), RepositoryOpenFlag.NO_SEARCH)


def objects_dir(repo: pygit2.Repository) -> Path:
    """The object directory of ``repo`` (the common dir's, for a linked worktree)."""
    gitdir = Path(repo.path)
    pointer = gitdir / "commondir"
    if pointer.is_file():
        target = Path(pointer.read_text().strip())
        gitdir = target if target.is_absolute() else (gitdir / target)
    return gitdir.resolve() / "objects"


# --- trees as raw objects --------------------------------------------------------------


def read_tree(repo: pygit2.Repository, oid: pygit2.Oid) -> TreeEntries:
    """The entries of tree ``oid``.

    Raises:
        KeyError: no such object. ValueError: the object is not a tree.
    """
    if oid == EMPTY_TREE:
        return {}
    kind, raw = repo.odb.read(oid)
    if kind != ObjectType.TREE:
        raise ValueError(f"object {oid} is not a tree")
    return parse_tree(raw)


def _order(item: tuple[bytes, tuple[int, bytes]]) -> bytes:
    name, (mode, _) = item
    return name + b"/" if mode == FileMode.TREE else name  # git sorts a directory as if it ended in "/"


def write_tree(odb: ObjectWriter, entries: TreeEntries) -> pygit2.Oid:
    """Write a tree object holding ``entries`` (git's order and mode spelling) to ``odb``
    (a repository's ``odb``, or an `objbatch.ObjectBatch`)."""
    raw = b"".join(
        b"%o %s\0%s" % (mode, name, oid_raw) for name, (mode, oid_raw) in sorted(entries.items(), key=_order)
    )
    return odb.write(ObjectType.TREE, raw)


def parse_tree(raw: bytes) -> TreeEntries:
    """The entries of a tree object's bytes."""
    return {m.group(2): (int(m.group(1), 8), m.group(3)) for m in _ENTRY.finditer(raw)}


def commit_object(tree: pygit2.Oid, parents: list[pygit2.Oid], sig: pygit2.Signature, message: str) -> bytes:
    """The bytes of a commit, as ``Repository.create_commit`` writes them (author and
    committer ``sig``), so a commit can go into an `objbatch.ObjectBatch`."""
    minutes = abs(sig.offset)
    stamp = b"%s <%s> %d %s%02d%02d" % (
        sig.raw_name,
        sig.raw_email,
        sig.time,
        b"-" if sig.offset < 0 else b"+",
        minutes // 60,
        minutes % 60,
    )
    lines = [b"tree %s" % str(tree).encode()]
    lines += [b"parent %s" % str(p).encode() for p in parents]
    lines += [b"author " + stamp, b"committer " + stamp]
    return b"\n".join(lines) + b"\n\n" + message.encode()


def blob_size(repo: pygit2.Repository, oid: pygit2.Oid) -> int:
    """The size of a blob (0 for the zero id or a missing object)."""
    if oid == ZERO_OID:
        return 0
    try:
        return repo.odb.read_header(oid)[1]
    except (KeyError, pygit2.GitError):
        return 0


# --- the worktree index ------------------------------------------------------------------


def add_index_entry(index: pygit2.Index, path: str, oid: pygit2.Oid, st: os.stat_result) -> None:
    """Add an index entry with the file's stat data and a known blob id (no hashing).

    pygit2's IndexEntry carries no stat data, so the entry is built for libgit2
    directly; with it, status and the next commit see the file as unchanged
    until it is appended to. Falls back to ``index.add`` (which hashes the file).
    """
    try:
        from pygit2.ffi import C, ffi
    except ImportError:  # pragma: no cover - a pygit2 without its cffi module
        index.add(path)
        return
    e = ffi.new("git_index_entry *")
    e.ctime.seconds, e.ctime.nanoseconds = int(st.st_ctime) & 0x7FFFFFFF, st.st_ctime_ns % 1_000_000_000
    e.mtime.seconds, e.mtime.nanoseconds = int(st.st_mtime) & 0x7FFFFFFF, st.st_mtime_ns % 1_000_000_000
    e.dev, e.ino = st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF
    e.mode = int(FileMode.BLOB_EXECUTABLE if st.st_mode & 0o100 else FileMode.BLOB)
    e.uid, e.gid = st.st_uid & 0xFFFFFFFF, st.st_gid & 0xFFFFFFFF
    e.file_size = st.st_size & 0xFFFFFFFF
    ffi.buffer(ffi.addressof(e, "id"))[:] = oid.raw
    c_path = ffi.new("char[]", path.encode("utf-8", "surrogateescape"))
    e.path = c_path
    if C.git_index_add(index._index, e) != 0:  # noqa: SLF001 - pygit2 exposes no stat-aware add
        index.add(path)


def update_index(repo: pygit2.Repository, files: dict[str, tuple[pygit2.Oid, os.stat_result]]) -> None:
    """Record the stat data and blob id of files just written or committed (no hashing)."""
    if not files:
        return
    index = repo.index
    index.read(False)
    for path, (oid, st) in files.items():
        add_index_entry(index, path, oid, st)
    index.write()


class IndexStats:
    """Stat data for the sync worktree's index, written in batches.

    The index only makes ``status`` cheap (how a sync without the daemon's record of
    appended files finds them). Writing it rewrites every entry: 4 ms at 11,000 files,
    in every commit and merge, growing with the history. Entries wait here and are
    written at most every `FLUSH_S` seconds, when the daemon stops and when an offline
    sync ends; entries lost in a crash cost the next ``status`` one hash per file touched
    meanwhile, never a wrong answer (a file whose stat differs is hashed and compared).
    ``lock`` guards the repository handle (the replicator's)."""

    FLUSH_S = 30.0

    def __init__(self, repo: pygit2.Repository, lock: threading.RLock):
        self.repo = repo
        self.lock = lock
        self.pending: dict[str, tuple[pygit2.Oid, os.stat_result]] = {}
        self.flushed = time.monotonic()

    def record(self, files: dict[str, tuple[pygit2.Oid, os.stat_result]]) -> None:
        """Called with ``lock`` held."""
        self.pending.update(files)
        if time.monotonic() - self.flushed >= self.FLUSH_S:
            self.flush()

    def flush(self, wait: bool = True) -> bool:
        """Write what waits; False when ``wait`` is False and the lock is busy (a cycle runs)."""
        if not self.lock.acquire(blocking=wait):
            return False
        try:
            if self.pending:
                update_index(self.repo, self.pending)
                self.pending = {}
            self.flushed = time.monotonic()
            return True
        finally:
            self.lock.release()


# --- libgit2's object cache ------------------------------------------------------------

# libgit2 keeps every commit and tree it parses in one process-wide cache of up to
# 256 MiB by default. A daemon parses new trees at every sync and seldom needs an old
# one again: over the storage benchmark's 5,000 syncs the cache only filled (with the
# cap the daemons' own memory peaked at ~148 MiB instead of 237). Thrum keeps its own
# bounded caches of what it reuses (`trees.LayoutTrees`).
OBJECT_CACHE_BYTES = 8 * 2**20


def bound_object_cache(max_bytes: int = OBJECT_CACHE_BYTES) -> None:
    """Cap libgit2's process-wide object cache (long-lived processes: the daemon)."""
    pygit2.settings.cache_max_size(max_bytes)


# --- packs deleted under a long-lived handle ------------------------------------------

# libgit2 adds the packs it finds to a handle's object database and never drops one
# that vanished from disk: each keeps its index mapped and its file descriptor open, and
# every lookup of an absent object (every new object written) searches it again. The
# daemon's consolidation deletes packs every few syncs, so a handle kept for days ends
# with thousands of dead packs: lookups many times slower, descriptors running out,
# and deleted packs' disk space never returned.


class PackWatch:
    """Release a handle's object database when packs it may have loaded are gone.

    Checked at the start of each sync step (a stat of ``objects/pack``; a listing only
    when that changed). ``free`` drops the database and the config, so the handle's
    app-level tuning is applied again."""

    def __init__(self, repo: pygit2.Repository, objects: Path):
        self.repo = repo
        self.pack_dir = objects / "pack"
        self._mtime_ns: int | None = None
        self._seen: set[str] = set()
        self.releases = 0

    def _listing(self) -> set[str]:
        try:
            return {n for n in os.listdir(self.pack_dir) if n.endswith(".idx")}
        except OSError:
            return set()

    def check(self) -> bool:
        """True when the handle was released (a pack it may hold was deleted)."""
        try:
            mtime = self.pack_dir.stat().st_mtime_ns
        except OSError:
            mtime = None
        if mtime == self._mtime_ns and mtime is not None:
            return False
        self._mtime_ns = mtime
        current = self._listing()
        vanished = bool(self._seen - current)
        self._seen = current if vanished else self._seen | current
        if vanished:
            self.repo.free()
            self.releases += 1
        return vanished


# --- pack building in libgit2's transport (fetches and pushes) ----------------------------

_DEFAULTS_DIR = Path(__file__).resolve().parent / "libgit2"  # holds `config`, shipped with thrum


def tune_pack_building() -> None:
    """Turn off delta search in the packs libgit2 builds in this process: our pushes, and a
    path remote's side of our fetches (libgit2 opens that repository itself, so only a
    process-wide default reaches it). The settings (``libgit2/config`` here) sit at
    libgit2's lowest config level: a repository's own config, or the user's, wins."""
    paths = pygit2.settings.search_path
    if paths[pygit2.enums.ConfigLevel.PROGRAMDATA] != str(_DEFAULTS_DIR):
        paths[pygit2.enums.ConfigLevel.PROGRAMDATA] = str(_DEFAULTS_DIR)

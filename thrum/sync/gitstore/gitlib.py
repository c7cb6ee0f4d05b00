"""libgit2 specifics in one place: what pygit2 does not wrap (cffi) and how thrum tunes it.

Rules:

1. Every call into pygit2's cffi layer (``pygit2.ffi``) lives here, so a pygit2
   upgrade that moves them breaks one module, and each has a plain fallback.
2. Tuning that only thrum's own handles should see is set at the app level on that
   handle (an extra config file), never in the user's git config.
3. pygit2's own types stay here and in `libgit2`: what crosses `api.GitStore` is
   `api.Oid` and plain data.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, ObjectType, RepositoryOpenFlag

from .api import Oid

log = logging.getLogger(__name__)

__all__ = [
    "OBJECT_CACHE_BYTES",
    "PackWatch",
    "add_index_entry",
    "bound_object_cache",
    "cache_log_trees",
    "discover",
    "fetch_refs",
    "objects_dir",
    "open_repo",
    "skip_hash_checks",
    "tune_pack_building",
    "update_index",
]


def discover(path: os.PathLike[str] | str) -> Path | None:
    """The git dir of the repository holding ``path`` (searching upwards), or None."""
    try:
        found = pygit2.discover_repository(str(path))
    except (pygit2.GitError, OSError):
        return None
    return Path(found) if found is not None else None


def open_repo(path: os.PathLike[str] | str) -> pygit2.Repository:
    """A repository handle at exactly ``path`` (no search upwards)."""
    return pygit2.Repository(str(path), RepositoryOpenFlag.NO_SEARCH)


def skip_hash_checks() -> None:
    """Read objects without hashing their content again (libgit2's strict hash verification
    off, process-wide: only for a process that does nothing else, `thrum.sync.checkout`'s
    second processes). Every object a fetch or a clone brought was named by the hash of
    what arrived when it was indexed; hashing it again on each read (SHA-1 with collision
    detection) is half the CPU of reading the log's blobs (1.7 of 3.4 s at a million events).
    Git's own checkout does not hash again either."""
    pygit2.settings.enable_strict_hash_verification(False)


def objects_dir(repo: pygit2.Repository) -> Path:
    """The object directory of ``repo`` (the common dir's, for a linked worktree)."""
    gitdir = Path(repo.path)
    pointer = gitdir / "commondir"
    if pointer.is_file():
        target = Path(pointer.read_text().strip())
        gitdir = target if target.is_absolute() else (gitdir / target)
    return gitdir.resolve() / "objects"


# --- the worktree index ------------------------------------------------------------------


def add_index_entry(index: pygit2.Index, path: str, oid: Oid, st: os.stat_result) -> None:
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


def update_index(repo: pygit2.Repository, files: dict[str, tuple[Oid, os.stat_result]]) -> None:
    """Record the stat data and blob id of files just written or committed (no hashing)."""
    if not files:
        return
    index = repo.index
    index.read(False)
    for path, (oid, st) in files.items():
        add_index_entry(index, path, oid, st)
    index.write()


# --- fetching ---------------------------------------------------------------------------


def fetch_refs(remote: pygit2.Remote, refspecs: list[str], callbacks: pygit2.RemoteCallbacks) -> None:
    """``remote.fetch(refspecs)`` (auto-detected proxy) without writing ``FETCH_HEAD``
    and without tags.

    Nothing of thrum's reads ``FETCH_HEAD``, and libgit2 rewrites it in place at every
    fetch, the empty ones included: opening it with ``O_TRUNC`` while the previous
    version is still in the page cache made ext4 (``auto_da_alloc``) flush it first,
    2–5 ms of waiting on each sync's fetch (0.2 ms without). Tags: a remote's default
    ("auto") creates every tag of the remote whose object we hold among the user's refs.
    pygit2's ``Remote.fetch`` offers no switch for the first: the same steps, with
    ``update_fetchhead`` off and ``download_tags`` none.
    """
    try:
        from pygit2.callbacks import git_fetch_options, git_proxy_options
        from pygit2.ffi import C, ffi
        from pygit2.utils import StrArray
    except ImportError:  # pragma: no cover - a pygit2 that moved them: its own fetch
        remote.fetch(refspecs, callbacks=callbacks, proxy=True)
        return
    opts = ffi.new("git_fetch_options *")
    C.git_fetch_options_init(opts, C.GIT_FETCH_OPTIONS_VERSION)
    opts.update_fetchhead = 0
    opts.download_tags = C.GIT_REMOTE_DOWNLOAD_TAGS_NONE
    with git_fetch_options(callbacks, opts) as payload:
        with git_proxy_options(remote, payload.fetch_options.proxy_opts, True):
            with StrArray(refspecs) as specs:
                err = C.git_remote_fetch(remote._remote, specs.ptr, payload.fetch_options, ffi.NULL)  # noqa: SLF001
                payload.check_error(err)


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


# Which trees the cache may hold. libgit2 caches no tree over 4 KiB by default, and a
# stream's directory of the log passes that at ~100 segments (9 KiB at the million-event
# history's 230). Every push walks the whole tree of the remote's tip (to leave out what
# it has) and looks up every directory of ours: each lookup read, inflated and hashed
# (SHA-1 with collision detection) the directory again, a third of a 10-event push's CPU.
# Commits as well (a commit that lists many paths). The cache's total cap still bounds it.
CACHED_TREE_BYTES = 256 * 2**10
CACHED_COMMIT_BYTES = 64 * 2**10
_cache_limits_set = False


def cache_log_trees() -> None:
    """Let libgit2's object cache hold the log's trees and commits (process-wide, once)."""
    global _cache_limits_set
    if _cache_limits_set:
        return
    pygit2.settings.cache_object_limit(ObjectType.TREE, CACHED_TREE_BYTES)
    pygit2.settings.cache_object_limit(ObjectType.COMMIT, CACHED_COMMIT_BYTES)
    _cache_limits_set = True


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

"""Durable writes under a root whose content is untrusted: a file is replaced whole or not at all.

The log's files (the store's appends aside) and the sync's merged files are written here.
Rules:

1. A write replaces a file atomically: a temporary file (`TMP_PREFIX`), fsynced, renamed
   over the old one, and its directory fsynced, so a crash never leaves a torn copy.
   `write_batch` does it for many files with one fsync round: every temporary file is
   fsynced (in parallel, `fsync_pool`) before any is renamed, and each directory is
   fsynced once.
2. The directories are walked by `thrum.nofollow` (no link followed; a link on the way is
   removed, never written through); the rename replaces a link itself, never its target.
3. A crash between the temporary file and its rename leaves the temporary file:
   `remove_temps` deletes those the next time the root is opened.

Standard library only: the store, the sync and every other layer may use it.
"""

from __future__ import annotations

import errno
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .nofollow import UnsafePath, open_dir, path_parts, regular_files

__all__ = ["TMP_PREFIX", "fsync_dir", "fsync_pool", "remove_temps", "write_atomic", "write_batch"]

TMP_PREFIX = ".thrum-tmp-"


def write_atomic(root: Path, rel: str, data: bytes) -> os.stat_result:
    """Replace ``root/rel`` with ``data`` (directories made as needed), never via a link.

    Raises:
        UnsafePath: a directory component is not a directory, or a directory sits
            where the file should be.
    """
    return write_batch(root, [(rel, data)])[0]


def write_batch(root: Path, items: list[tuple[str, bytes]]) -> list[os.stat_result]:
    """Write many files (rule 1) with one fsync round; the stat of each file written.

    Every file is complete and fsynced before any of them replaces its old copy, so a
    crash leaves each file either old or new, never torn. Links on the way are removed.

    Raises:
        UnsafePath: as `write_atomic` (files already renamed stay written).
    """
    dirs: dict[str, int] = {}
    staged: list[tuple[int, str, str]] = []  # (dir fd, temp name, final name)
    renamed = 0
    try:
        jobs = []
        for rel, data in items:
            *parts, name = path_parts(rel)
            key = "/".join(parts)
            dfd = dirs.get(key)
            if dfd is None:
                opened = open_dir(root, key, create=True, drop_links=True)
                assert opened is not None
                dfd = dirs[key] = opened
            tmp = f"{TMP_PREFIX}{name}.{os.getpid()}"
            staged.append((dfd, tmp, name))
            jobs.append((dfd, tmp, data))
        if len(jobs) > 1:
            list(fsync_pool().map(_write_temp, jobs))
        elif jobs:
            _write_temp(jobs[0])
        by_dir: dict[int, list[int]] = {}
        for i, (dfd, _, _) in enumerate(staged):
            by_dir.setdefault(dfd, []).append(i)
        stats: list[os.stat_result | None] = [None] * len(staged)
        if len(by_dir) > 1:
            list(fsync_pool().map(lambda idxs: _rename_all(staged, idxs, stats), by_dir.values()))
        else:
            for idxs in by_dir.values():
                _rename_all(staged, idxs, stats)
        renamed = len(staged)  # every directory's files are renamed (or _rename_all raised)
        return [st for st in stats if st is not None]
    finally:
        for dfd, tmp, _ in staged[renamed:]:  # failed before its rename: leave no temporary file behind
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        for dfd in dirs.values():
            os.close(dfd)


def _rename_all(staged: list[tuple[int, str, str]], idxs: list[int], stats: list[os.stat_result | None]) -> None:
    """Rename one directory's staged files into place, then fsync that directory (a worker
    thread per directory: renames and fsyncs of different directories do not wait on each other)."""
    for i in idxs:
        dfd, tmp, name = staged[i]
        try:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)  # replaces a link itself, never its target
        except IsADirectoryError:
            raise UnsafePath(errno.EISDIR, f"{name} is a directory, not a file") from None
        stats[i] = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    os.fsync(staged[idxs[0]][0])


def _write_temp(job: tuple[int, str, bytes]) -> None:
    dfd, tmp, data = job
    try:
        os.unlink(tmp, dir_fd=dfd)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def fsync_pool() -> ThreadPoolExecutor:
    """Threads for fsyncs that may run together (the filesystem merges them into fewer commits)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="thrum-fsync")
        return _POOL


def fsync_dir(path: Path) -> None:
    """fsync a directory (a file created or renamed in it survives power loss); errors ignored."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_temps(root: Path) -> list[str]:
    """Remove the temporary files of a `write_batch` that a crash interrupted; their paths."""
    stale = regular_files(root, lambda rel: rel.rsplit("/", 1)[-1].startswith(TMP_PREFIX))
    for rel in stale:
        try:
            os.unlink(root / rel)
        except OSError:
            continue
    return stale

"""File access inside the sync worktree that never follows a symbolic link.

The worktree's content comes from the remote, which is untrusted: whoever can push
to ``a-sync`` decides which paths exist there. Rules:

1. Every path is walked one component at a time from the worktree root with
   directory file descriptors and ``O_NOFOLLOW``, so no symlink (in a directory
   component or the final one) is ever followed: nothing is read from, or written
   to, outside the worktree.
2. A symlink found on the way is removed (unlinking a link never touches its
   target) and the walk goes on as if it were absent: links are never legitimate
   in the worktree, thrum writes none.
3. Only regular files are read; a FIFO, device or directory in a file's place is
   an `UnsafePath` error, never a blocking read.
4. Writes replace a file atomically (temporary file, fsync, rename, fsync of the
   directory), so a crash never leaves a torn copy. `write_batch` does the same
   for many files with one fsync round: every temporary file is fsynced (in
   parallel) before any is renamed, and each directory is fsynced once.

The worktree root itself is ours (under the git common dir) and is trusted.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from . import SyncError

log = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
TMP_PREFIX = ".thrum-tmp-"

__all__ = [
    "TMP_PREFIX",
    "NotRegular",
    "UnsafePath",
    "is_regular",
    "open_regular",
    "read_regular",
    "read_regular_stat",
    "remove_unwanted",
    "write_atomic",
    "write_batch",
]


class UnsafePath(SyncError):
    """Something other than a directory or regular file sits where the layout expects one."""


class NotRegular(OSError):
    """`open_regular` found something other than a regular file."""


@contextmanager
def open_regular(path: Path) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """The regular file at ``path`` (a file of an object store, outside the worktree),
    open for reading, and its stat: rule 3, and no link in its last component.

    Raises:
        FileNotFoundError, NotADirectoryError: nothing there.
        NotRegular: a FIFO, device, socket or directory (never waited on).
        OSError: a link (``ELOOP``), or it cannot be opened.
    """
    fd = os.open(path, _READ_FLAGS)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file", str(path))
        yield f, st


def _parts(rel: str) -> list[str]:
    parts = rel.split("/")
    if not parts or any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise UnsafePath(f"refusing unsafe path {rel!r} in the sync worktree")
    return parts


def _drop_link(dir_fd: int, name: str, rel: str) -> bool:
    """Remove ``name`` if it is a symlink; True when it was one."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISLNK(st.st_mode):
        return False
    os.unlink(name, dir_fd=dir_fd)
    log.warning("removed a symbolic link at %s in the sync worktree (links are never followed)", rel)
    return True


def _open_dirs(root: Path, dirs: list[str], *, create: bool, rel: str) -> int | None:
    """A descriptor of the directory ``root/dirs...``; None when absent and not ``create``."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(dirs):
            where = "/".join(dirs[: i + 1])
            _drop_link(fd, name, where)
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:  # another writer thread made it first
                    pass
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise UnsafePath(f"{where} in the sync worktree is not a directory; cannot use {rel}") from None
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_regular(root: Path, rel: str) -> bytes | None:
    """The bytes of the regular file ``root/rel``; None when it does not exist.

    Raises:
        UnsafePath: the path is malformed, or a directory component or the file
            itself is something other than a directory / regular file.
    """
    found = read_regular_stat(root, rel)
    return None if found is None else found[0]


def read_regular_stat(root: Path, rel: str) -> tuple[bytes, os.stat_result] | None:
    """(bytes, stat) of the regular file ``root/rel``; None when it does not exist.

    Raises:
        UnsafePath: as `read_regular`.
    """
    *dirs, name = _parts(rel)
    dfd = _open_dirs(root, dirs, create=False, rel=rel)
    if dfd is None:
        return None
    try:
        _drop_link(dfd, name, rel)
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePath(f"{rel} in the sync worktree is a symbolic link") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafePath(f"{rel} in the sync worktree is not a regular file")
            chunks = []
            while True:
                chunk = os.read(fd, max(1 << 16, st.st_size + 1))
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks), st
        finally:
            os.close(fd)
    finally:
        os.close(dfd)


def write_atomic(root: Path, rel: str, data: bytes) -> None:
    """Replace ``root/rel`` with ``data`` (directories created as needed), never via a link.

    Raises:
        UnsafePath: a directory component is not a directory, or a directory
            sits where the file should be.
    """
    *dirs, name = _parts(rel)
    dfd = _open_dirs(root, dirs, create=True, rel=rel)
    assert dfd is not None
    try:
        tmp = f"{TMP_PREFIX}{name}.{os.getpid()}"
        _write_temp((dfd, tmp, data))
        try:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)  # replaces a link itself, never its target
        except IsADirectoryError:
            os.unlink(tmp, dir_fd=dfd)
            raise UnsafePath(f"{rel} in the sync worktree is a directory, not a file") from None
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_batch(root: Path, items: list[tuple[str, bytes]]) -> list[os.stat_result]:
    """`write_atomic` for many files with one fsync round; the stat of each file written.

    Every file is complete and fsynced (in parallel) before any of them replaces
    its old copy, so a crash leaves each file either old or new, never torn.

    Raises:
        UnsafePath: as `write_atomic` (files already renamed stay written).
    """
    dirs: dict[str, int] = {}
    staged: list[tuple[int, str, str]] = []  # (dir fd, temp name, final name)
    renamed = 0
    try:
        jobs = []
        for rel, data in items:
            *parts, name = _parts(rel)
            key = "/".join(parts)
            dfd = dirs.get(key)
            if dfd is None:
                dfd = dirs[key] = _open_dirs(root, parts, create=True, rel=rel)
            tmp = f"{TMP_PREFIX}{name}.{os.getpid()}"
            staged.append((dfd, tmp, name))
            jobs.append((dfd, tmp, data))
        if len(jobs) > 1:
            list(_sync_pool().map(_write_temp, jobs))
        elif jobs:
            _write_temp(jobs[0])
        by_dir: dict[int, list[int]] = {}
        for i, (dfd, _, _) in enumerate(staged):
            by_dir.setdefault(dfd, []).append(i)
        stats: list = [None] * len(staged)
        list(_sync_pool().map(lambda idxs: _rename_all(staged, idxs, stats), by_dir.values()))
        renamed = len(staged)  # every directory's files are renamed (or _rename_all raised)
        return stats
    finally:
        for dfd, tmp, _ in staged[renamed:]:  # failed before its rename: leave no temporary file behind
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        for dfd in dirs.values():
            if dfd is not None:
                os.close(dfd)


def _rename_all(staged: list[tuple[int, str, str]], idxs: list[int], stats: list) -> None:
    """Rename one directory's staged files into place, then fsync that directory (a worker
    thread per directory: renames and fsyncs of different directories do not wait on each other)."""
    for i in idxs:
        dfd, tmp, name = staged[i]
        try:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except IsADirectoryError:
            raise UnsafePath(f"{name} in the sync worktree is a directory, not a file") from None
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


_POOL = None


def _sync_pool():
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="thrum-sync-fsync")
    return _POOL


def is_regular(root: Path, rel: str) -> bool:
    """True when ``root/rel`` is a regular file reached without any symlink."""
    try:
        *dirs, name = _parts(rel)
        dfd = _open_dirs(root, dirs, create=False, rel=rel)
    except (UnsafePath, OSError):
        return False
    if dfd is None:
        return False
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        return stat.S_ISREG(st.st_mode)
    except OSError:
        return False
    finally:
        os.close(dfd)


def remove_unwanted(root: Path, wanted: Callable[[str], bool]) -> list[str]:
    """Remove every symlink, and every file that ``wanted(rel)`` rejects, under ``root``.

    Directories are walked without following links; ``.git`` (the worktree's
    pointer file) is kept. Returns the relative paths removed. Used after git
    materialised a tree we did not choose (a fresh worktree).
    """
    removed = []
    for rel, is_link in _walk(root):
        if rel == ".git":
            continue
        if is_link or not wanted(rel):
            try:
                os.unlink(root / rel)
            except OSError:
                continue
            removed.append(rel)
    if removed:
        log.warning(
            "removed %d path(s) from the sync worktree that thrum never reads (links or files outside its layout): %s",
            len(removed),
            ", ".join(removed[:10]),
        )
    return removed


def _walk(root: Path, prefix: str = "") -> Iterator[tuple[str, bool]]:
    """(relative path, is a link) of every non-directory entry, links not followed."""
    try:
        entries = list(os.scandir(root / prefix if prefix else root))
    except OSError:
        return
    for entry in entries:
        rel = f"{prefix}{entry.name}"
        if entry.is_symlink():
            yield rel, True
        elif entry.is_dir(follow_symlinks=False):
            if rel != ".git":
                yield from _walk(root, rel + "/")
        else:
            yield rel, False

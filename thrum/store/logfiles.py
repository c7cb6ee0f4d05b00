"""File access in the log's worktree that never follows a link (the worktree is untrusted).

Every path is walked one directory at a time with directory descriptors and
``O_NOFOLLOW``: a link in a directory component or in a file's place is refused,
never followed, so nothing outside the worktree is read or appended to. Only the
layout's own paths are opened (`thrum.events.parse_log_path`). Also the fsync
helpers the writer's group commit uses.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from pathlib import Path

from .. import events as ev

log = logging.getLogger("thrum.store.log")

__all__ = ["entries", "fsync_dir", "fsync_pool", "open_dir", "open_segment"]


def open_segment(root: Path, shard: str):
    """Open a segment for reading, refusing links in its directories and itself
    (the worktree is untrusted input).

    Raises:
        ValueError: not a path of the layout.
        FileNotFoundError: no such file.
    """
    ev.parse_log_path(shard)
    stream, name = shard.rsplit("/", 1)
    try:
        dfd = open_dir(root, stream, create=False)
        if dfd is None:
            raise FileNotFoundError(root / shard)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EISDIR):
            raise
        log.warning("ignoring %s in the log: a link or not a regular file", shard)
        raise FileNotFoundError(root / shard) from None
    return os.fdopen(fd, "rb")


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir(root: Path, rel: str, *, create: bool) -> int | None:
    """A descriptor of ``root/rel``, walked one component at a time without following
    links; None when it is absent and not ``create``.

    Raises:
        OSError: a component is a link or not a directory (ELOOP / ENOTDIR).
    """
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:  # the worktree vanished: the sync recreates it and recovers these files
        if not create:
            return None
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in rel.split("/"):
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def entries(root: Path, rel: str, *, want_dirs: bool) -> list[str]:
    """Names of the real directories (or regular files) in ``root/rel``; links skipped."""
    try:
        dfd = open_dir(root, rel, create=False)
    except OSError:
        log.warning("ignoring %s in the log: not a directory", rel)
        return []
    if dfd is None:
        return []
    try:
        with os.scandir(dfd) as it:
            return [
                e.name
                for e in it
                if (e.is_dir(follow_symlinks=False) if want_dirs else e.is_file(follow_symlinks=False))
            ]
    finally:
        os.close(dfd)


_POOL = None
_POOL_LOCK = threading.Lock()


def fsync_pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="thrum-fsync")
        return _POOL


def fsync_dir(path: Path) -> None:
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

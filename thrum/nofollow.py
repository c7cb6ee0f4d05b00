"""File access under a root whose content is untrusted, never through a symbolic link.

The log's worktree holds what the remote sent: whoever can push to ``a-sync`` decides
which paths exist there. The store (appending, reading segments) and the sync (merging,
committing, materialising a fresh worktree) both go through this one walker. Rules:

1. A path is walked one component at a time from the root with directory descriptors
   and ``O_NOFOLLOW``: no link (in a directory component or the last one) is followed,
   so nothing outside the root is read from or written to. The root itself is ours
   (under the git common dir) and trusted.
2. A link met on the way is either refused (``drop_links=False``: `UnsafePath`, the
   caller skips the path) or removed (``drop_links=True``: unlinking a link never
   touches its target, and the walk goes on as if it were absent). Links are never
   legitimate in the worktree: thrum writes none.
3. Only regular files are read; a FIFO, device or directory in a file's place is an
   `UnsafePath`, never a blocking read.
4. Writing goes through the same walk (`open_dir` with ``create``): `thrum.durable`
   replaces files whole under a root this module opens.
5. Walks of a whole tree (`regular_files`) are iterative and
   bounded in depth: a directory nested thousands of levels deep is skipped, never a
   ``RecursionError``.

Standard library only: the store, the sync and every other layer may use it.
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

log = logging.getLogger(__name__)

__all__ = [
    "MAX_WALK_DEPTH",
    "NotRegular",
    "UnsafePath",
    "entries",
    "is_regular",
    "open_dir",
    "open_file",
    "open_regular",
    "path_parts",
    "read_regular",
    "regular_files",
    "remove_tree",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
MAX_WALK_DEPTH = 64  # the log's layout is 3 levels deep; anything deeper is not ours to walk


class UnsafePath(OSError):
    """A link, or something other than a directory or regular file, where a path leads."""


class NotRegular(OSError):
    """`open_regular` found something other than a regular file."""


def path_parts(rel: str) -> list[str]:
    """The components of a relative path. Raises: UnsafePath: an empty, ``.``, ``..`` or NUL one."""
    parts = rel.split("/")
    if not parts or any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise UnsafePath(errno.EINVAL, f"refusing unsafe path {rel!r}")
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
    log.warning("removed a symbolic link at %s in the log's worktree (links are never followed)", rel)
    return True


def open_dir(root: Path, rel: str, *, create: bool = False, drop_links: bool = False) -> int | None:
    """A descriptor of the directory ``root/rel`` ("" is the root), walked as rule 1 says;
    None when it is absent and not ``create``. A root that vanished is made again when
    ``create`` (the sync recreates the worktree and recovers its files).

    Raises:
        UnsafePath: a component is a link (unless dropped) or not a directory.
    """
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if not create:
            return None
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    dirs = path_parts(rel) if rel else []
    try:
        for i, name in enumerate(dirs):
            where = "/".join(dirs[: i + 1])
            if drop_links:
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
                    raise UnsafePath(exc.errno, f"{where} is a link or not a directory; cannot use {rel}") from None
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_file(root: Path, rel: str, *, drop_links: bool = False) -> BinaryIO | None:
    """The regular file ``root/rel`` open for reading (rules 1-3); None when there is none.

    Raises:
        UnsafePath: a link (unless dropped), a FIFO, a device or a directory on the way.
    """
    *dirs, name = path_parts(rel)
    dfd = open_dir(root, "/".join(dirs), drop_links=drop_links)
    if dfd is None:
        return None
    try:
        if drop_links:
            _drop_link(dfd, name, rel)
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePath(exc.errno, f"{rel} is a symbolic link") from None
            raise
    finally:
        os.close(dfd)
    f = os.fdopen(fd, "rb")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(errno.EINVAL, f"{rel} is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        f.close()
        raise
    return f


def read_regular(root: Path, rel: str, *, drop_links: bool = True) -> tuple[bytes, os.stat_result] | None:
    """(bytes, stat) of the regular file ``root/rel``; None when it does not exist.

    Raises:
        UnsafePath: as `open_file`.
    """
    f = open_file(root, rel, drop_links=drop_links)
    if f is None:
        return None
    with f:
        st = os.fstat(f.fileno())
        chunks = []
        while True:
            chunk = f.read(max(1 << 16, st.st_size + 1))
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), st


def is_regular(root: Path, rel: str) -> bool:
    """True when ``root/rel`` is a regular file reached without any link."""
    try:
        *dirs, name = path_parts(rel)
        dfd = open_dir(root, "/".join(dirs))
    except OSError:
        return False
    if dfd is None:
        return False
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False
    finally:
        os.close(dfd)


def entries(root: Path, rel: str, *, want_dirs: bool) -> list[str]:
    """Names of the real directories (or regular files) in ``root/rel``; links skipped."""
    try:
        dfd = open_dir(root, rel)
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


# --- whole trees -------------------------------------------------------------------------


def _walk(root: Path, max_depth: int = MAX_WALK_DEPTH) -> Iterator[tuple[str, bool]]:
    """(relative path, is a link) of every non-directory entry below ``root``, links not
    followed, ``.git`` not entered; iterative, directories deeper than ``max_depth`` skipped."""
    stack: list[tuple[str, int]] = [("", 0)]
    while stack:
        prefix, depth = stack.pop()
        try:
            with os.scandir(root / prefix if prefix else root) as it:
                found = list(it)
        except OSError:
            continue
        for entry in found:
            rel = f"{prefix}{entry.name}"
            if entry.is_symlink():
                yield rel, True
            elif entry.is_dir(follow_symlinks=False):
                if rel == ".git":
                    continue
                if depth + 1 > max_depth:
                    log.warning("not walking %s: nested deeper than %d directories", rel, max_depth)
                    continue
                stack.append((rel + "/", depth + 1))
            else:
                yield rel, False


def regular_files(root: Path, wanted: Callable[[str], bool]) -> list[str]:
    """Relative paths of the regular files below ``root`` that ``wanted`` accepts (rule 5)."""
    out = []
    for rel, is_link in _walk(root):
        if not is_link and wanted(rel):
            try:
                if stat.S_ISREG(os.lstat(root / rel).st_mode):
                    out.append(rel)
            except OSError:
                continue
    return sorted(out)


def remove_tree(path: Path) -> None:
    """Delete ``path`` and everything below it: no link followed (a link is removed, never
    entered), no recursion and two descriptors at most, however deep the tree.

    Each directory met below the top is moved up into the top directory under a fresh
    name before it is emptied, so the tree flattens as it goes; a tree of any depth costs
    one rename per directory. Missing entries (another remover) are skipped. ``shutil.rmtree``
    recurses once per level (a 1,530-level directory raised RecursionError).

    Raises:
        OSError: an entry could not be removed (permissions).
    """
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        os.unlink(path)  # a file or a link where a directory was expected
        return
    try:
        moved = 0
        while True:
            with os.scandir(top) as it:
                names = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            if not names:
                break
            for name, is_dir in names:
                if not is_dir:
                    _unlink_missing_ok(name, top)
                    continue
                try:
                    sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
                except FileNotFoundError:
                    continue
                try:
                    with os.scandir(sub) as it:
                        inner = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
                    for child, child_is_dir in inner:
                        if child_is_dir:  # up into the top directory: the tree flattens
                            moved += 1
                            os.rename(child, f".thrum-rm-{moved}-{child}"[:255], src_dir_fd=sub, dst_dir_fd=top)
                        else:
                            _unlink_missing_ok(child, sub)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)


def _unlink_missing_ok(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass

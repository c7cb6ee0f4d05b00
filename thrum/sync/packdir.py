"""An object store's pack directory, as files: its packs and their bytes, its lock, and the
temporary files a killed writer left (`thrum.sync.maintenance` decides what to repack when;
this module only looks at and tidies the directory; its rules 5 and 6 say why).

- The lock is an ``flock`` on the ``objects`` directory itself, not a lock file: it cannot go
  stale when a process is killed, and it creates nothing in another user's repository. A
  repack's git child inherits it, so it lasts as long as git does.
- Temporary files are removed only when named as git's, libgit2's or objbatch's temporaries
  and untouched for `STALE_TEMP_S`; a ``pack-*`` file is never touched.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = [
    "STALE_TEMP_S",
    "bitmapped_bytes",
    "bitmapped_pack",
    "lock_store",
    "locked_store",
    "pack_bytes",
    "pack_count",
    "packs",
    "sweep_temporaries",
]

STALE_TEMP_S = 3600.0  # twice a repack's time limit (`maintenance.TIMEOUT_S`): no live repack's file is that old
# git repack's staging names, then the temporary files of git pack-objects, libgit2 and objbatch
_TEMPORARY = re.compile(r"\.tmp-\d+-pack-|tmp_(?:pack|idx|rev|bitmap|mtimes)_|pack_git2_")
_PACK_NAME = re.compile(r"pack-(?:[0-9a-f]{40}|[0-9a-f]{64})\.pack")  # SHA-1 or SHA-256


def packs(objects: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(objects / "pack") as it:
            return [e for e in it if e.name.endswith(".pack")]
    except OSError:
        return []


def pack_count(objects: Path) -> int:
    return len(packs(objects))


def bitmapped_pack(objects: Path) -> tuple[str, int] | None:
    """The name and bytes of the largest pack in ``objects`` with a bitmap beside it: what a
    path remote's last full repack left, whichever replica ran it (rule 4); None: there is
    none. Only a name git gives a pack counts (it goes on git's command line)."""
    found = []
    for e in packs(objects):
        if _PACK_NAME.fullmatch(e.name) and os.path.lexists(e.path[: -len(".pack")] + ".bitmap"):
            try:
                found.append((e.stat(follow_symlinks=False).st_size, e.name))
            except OSError:
                continue
    if not found:
        return None
    size, name = max(found)
    return name, size


def bitmapped_bytes(objects: Path) -> int | None:
    """The bytes of `bitmapped_pack` (None: there is none)."""
    pack = bitmapped_pack(objects)
    return None if pack is None else pack[1]


def pack_bytes(objects: Path) -> int:
    """The bytes of the packs in ``objects`` (what a full repack shrinks)."""
    total = 0
    for e in packs(objects):
        try:
            total += e.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total


def sweep_temporaries(objects: Path, older_than: float = STALE_TEMP_S) -> list[str]:
    """Remove the temporary files in ``objects/pack`` a killed writer left (rule 6): names
    git, libgit2 or objbatch give their temporaries, untouched for ``older_than``
    seconds. The names removed (logged); nothing else is touched, errors are skipped."""
    removed = []
    limit = time.time() - older_than
    try:
        with os.scandir(objects / "pack") as it:
            entries = [e for e in it if _TEMPORARY.match(e.name)]
    except OSError:
        return []
    for e in entries:
        try:
            if e.stat(follow_symlinks=False).st_mtime >= limit:
                continue
            os.unlink(e.path)  # a link is removed itself, never what it points to
        except OSError:  # gone meanwhile, a directory, not ours to remove
            continue
        removed.append(e.name)
    if removed:
        log.info("removed %d stale temporary file(s) from %s: %s", len(removed), objects / "pack", ", ".join(removed))
    return removed


def lock_store(objects: Path) -> int | None:
    """An ``flock`` on ``objects`` (rule 5): its descriptor, or None when another process
    holds it (or the directory cannot be opened). Closing the descriptor, in every process
    that has it, releases it."""
    try:
        fd = os.open(objects, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


@contextmanager
def locked_store(objects: Path) -> Iterator[int | None]:
    """`lock_store` for a ``with`` block: the descriptor (None: someone else repacks it)."""
    fd = lock_store(objects)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)

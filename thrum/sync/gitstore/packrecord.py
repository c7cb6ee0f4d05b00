"""Which packs of an object store are thrum's, so consolidation may roll them up.

``objects/info/thrum-packs`` lists them, a name per line: the packs each sync step
writes (`objbatch`), those thrum's network fetches bring, and those consolidation
writes. Packs it does not list (the user's, git's) are never touched.

Rules:

1. A sync records its pack by an append, which creates no file; a roll-up rewrites
   the record (temporary name, rename) after reading it again, so appends made
   meanwhile are kept.
2. The record of a shared remote is written by whoever can push there: only names
   of the form ``pack-<40 hex>`` are read (a name is joined into paths that are
   deleted), at most `RECORD_MAX` bytes, and the file is never opened through a
   link, nor read if it is not a regular file.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import stat
from pathlib import Path

from thrum.nofollow import open_regular

log = logging.getLogger(__name__)

__all__ = ["RECORD_MAX", "load_record", "record_packs", "recorded_packs", "save_record"]

RECORD = Path("info") / "thrum-packs"
RECORD_MAX = 4 << 20  # bytes of the record read (~90,000 names)
_PACK_NAME = re.compile(r"pack-[0-9a-f]{40}")


def record_packs(objects: Path, names: list[str]) -> None:
    """Add packs to the ones thrum consolidates (rule 1). An append that lands in the
    microseconds between a roll-up's last reading and its rename is lost: that pack
    then stays as it is, its objects whole, only never rolled up."""
    if not names:
        return
    path = objects / RECORD
    try:
        path.parent.mkdir(exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(path, flags, 0o644)  # a FIFO: ENXIO at once, never a wait for a reader
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"{path} is not a regular file")
            os.write(fd, "".join(f"{n}\n" for n in names).encode("ascii"))
        finally:
            os.close(fd)
    except OSError as exc:  # e.g. a link planted in a shared remote: the packs stay as they are
        log.warning("cannot record packs in %s (%s); they will not be consolidated", path, exc)


def load_record(objects: Path) -> list[str]:
    """The recorded pack names. Only well-formed ones: the record of a shared remote is
    written by whoever can push there, and a name is joined into paths we delete."""
    data = _read_regular(objects / RECORD, RECORD_MAX)
    if data is None:
        return []
    text = data.decode("ascii", "replace")
    return [m.group(0) for m in map(_PACK_NAME.fullmatch, text.split()) if m is not None]


def save_record(objects: Path, names: list[str]) -> None:
    """Replace the record with ``names`` (rule 1: the caller has just read it again)."""
    path = objects / RECORD
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, "".join(f"{n}\n" for n in dict.fromkeys(names)).encode("ascii"))
        os.fsync(fd)  # a crash must not leave an empty record: its packs would never be rolled up
    finally:
        os.close(fd)
    os.replace(tmp, path)


def recorded_packs(objects: Path) -> list[tuple[int, str]]:
    """(objects held, name) of the recorded packs that exist and are not kept, fewest first.

    Packs are weighed by their object count, not their bytes: a sync's pack holds whole
    blobs (`objbatch`), a rolled-up one deltas, so by bytes a few syncs' packs outweigh
    the whole history and every roll-up would rewrite it. By count, each object is
    rewritten O(log n) times."""
    packs = []
    for name in dict.fromkeys(load_record(objects)):
        if _is_regular(objects / "pack" / f"{name}.idx") and not (objects / "pack" / f"{name}.keep").exists():
            count = _object_count(objects / "pack" / f"{name}.pack")
            if count is not None:
                packs.append((count, name))
    return sorted(packs)


def _object_count(pack: Path) -> int | None:
    """The object count in a pack's header (None: no such pack, or not one)."""
    head = _read_regular(pack, 12)
    if head is None or len(head) < 12 or head[:4] != b"PACK":
        return None
    return int.from_bytes(head[8:12], "big")


def _read_regular(path: Path, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of a regular file; None for anything else (`thrum.nofollow.open_regular`)."""
    try:
        with open_regular(path) as (f, _):
            return f.read(limit)
    except OSError:
        return None


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False

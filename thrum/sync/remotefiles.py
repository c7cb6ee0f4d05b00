"""A local remote's files, read as what they are: input from whoever can push there.

A remote on a shared filesystem is written by every pusher, who can put anything at
any of its paths. Rules:

1. Nothing libgit2 opens in it may be a FIFO, a device or a socket (opening one can
   wait forever, and a waiting sync holds its lock): `refuse_special_files` checks
   the files libgit2 reads before the remote is opened, and each loose object is
   checked as it is read (`read_loose`, or `MAX_OBJECT_BYTES` and the path before
   libgit2 reads one).
2. A loose object is never read through a link, and is inflated with a bound, then
   hashed (`verified_blob`): a zlib bomb cannot fill memory, a forged object is
   refused.
3. Objects over `MAX_OBJECT_BYTES` are refused with a clear error. Files over
   `trees.MAX_FILE_BYTES` are still copied (the merge ignores them, and syncing goes
   on past them: the hostile-remote tests push a 100 MB line); the bound is far above
   that, where only a zlib bomb's inflated size would be.
"""

from __future__ import annotations

import hashlib
import os
import stat
import zlib
from pathlib import Path

import pygit2

from . import SyncError
from thrum.nofollow import open_regular

from .trees import MAX_FILE_BYTES

__all__ = ["MAX_OBJECT_BYTES", "read_loose", "refuse_special", "refuse_special_files", "too_large", "verified_blob"]

MAX_OBJECT_BYTES = 32 * MAX_FILE_BYTES  # 512 MiB: a file over MAX_FILE_BYTES is carried (and ignored), a bomb is not

_READ_BY_LIBGIT2 = ("config", "HEAD", "commondir", "packed-refs", "refs/heads/a-sync", "objects/info/alternates")


def refuse_special_files(root: Path) -> None:
    """Refuse a local remote where a file libgit2 opens is a FIFO, a device or a socket.

    Whoever can push to a remote on a shared filesystem can plant one, and opening it
    waits forever (a sync holding its lock, for good). Checked through links, as libgit2
    opens them: a link to a regular file is only read. What is swapped in after this
    check is not caught; loose objects are checked again as they are read.

    Raises:
        SyncError: naming the file.
    """
    for rel in _READ_BY_LIBGIT2:
        refuse_special(root / rel)
    try:
        with os.scandir(root / "objects" / "pack") as entries:
            for entry in entries:  # the directory's own file types: no stat unless a link
                if not (entry.is_file() or entry.is_dir()):
                    refuse_special(Path(entry.path))
    except OSError:
        pass


def refuse_special(path: Path) -> None:
    """Raise `SyncError` when ``path`` (through links, as libgit2 opens it) is there and
    is neither a regular file nor a directory."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise SyncError(f"the remote's {path} is not a regular file; remove it there (`git fsck` in that repository)")


def read_loose(objects: Path, oid: pygit2.Oid) -> bytes | None:
    """A loose object's file, None when there is none. Never through a link, never a
    FIFO or device (whoever can push to a shared remote can plant one, to make us
    read a file of ours, or wait forever)."""
    hexs = str(oid)
    try:
        with open_regular(objects / hexs[:2] / hexs[2:]) as (f, st):
            if st.st_size > MAX_OBJECT_BYTES:
                raise too_large(oid)
            return f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise SyncError(f"the remote's object {oid} is not a regular file ({exc.strerror or exc})") from None


def too_large(oid: pygit2.Oid) -> SyncError:
    """The error for an object over `MAX_OBJECT_BYTES`."""
    return SyncError(f"the remote's object {oid} is larger than {MAX_OBJECT_BYTES >> 20} MiB; thrum does not copy it")


def verified_blob(oid: pygit2.Oid, raw: bytes) -> bytes:
    """The content of loose blob ``raw`` after checking that it really is ``oid``."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(raw, MAX_OBJECT_BYTES + 64)  # bounded: no zlib bomb fills memory
        ok = True
    except zlib.error:
        ok = False
    if ok and inflater.unconsumed_tail:
        raise too_large(oid)
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

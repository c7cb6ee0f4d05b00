"""Which paths under a prefix git's index tracks, read straight from the index file.

Every command asks this about ``.thrum/`` (`thrum.ownership`), and importing
pygit2 alone costs ~40 ms, more than the Gas City provider's whole budget. The
question is narrow and the index is sorted by path, so this reads the file's
header and walks entries from the start until they sort past the prefix: a few
entries in any repository (only names that begin with ``!``..``-`` or ``.``
come before ``.thrum/``). Read-only; nothing here writes git's formats.

Rules (git's Documentation/gitformat-index.txt):

1. Versions 2, 3 and 4 (4 compresses each path against the previous one); object
   ids of 20 bytes, or 32 in a SHA-256 repository (``extensions.objectformat``).
2. A split index (``core.splitIndex``) keeps most entries in ``sharedindex.*``
   files: those are read too, so a path tracked only there is still found (a
   deleted entry the split part overrides is reported as tracked: the safe side).
3. A sparse index lists a directory it does not expand as one entry ending in
   ``/``: it counts as tracking everything below it.
4. An index thrum cannot read (another version, a truncated file) is reported as
   `Unreadable`: callers refuse rather than guess.
"""

from __future__ import annotations

import os
from pathlib import Path

from .paths import linked_git_dir

TYPE_CHECKING = False  # typing is not imported: it costs start-up time (mypy reads this as True)
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["Unreadable", "git_dir_of", "tracked_under"]

_HEADER = 12  # "DIRC", the version, the number of entries (no struct, no re: start-up time)
_FIXED = 40  # ctime, mtime (8 bytes each), dev, ino, mode, uid, gid, size (4 each)
_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF
_CHUNK = 1 << 14


class Unreadable(Exception):
    """The index file is not one this reader understands."""


def git_dir_of(checkout: Path) -> Path | None:
    """The git directory of the checkout at ``checkout`` (``.git``, or where a ``.git``
    file points for a linked worktree); None when there is none."""
    dotgit = checkout / ".git"
    return dotgit if dotgit.is_dir() else linked_git_dir(checkout)


def _common_dir(git_dir: Path) -> Path:
    try:
        rel = (git_dir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return git_dir
    return Path(rel) if os.path.isabs(rel) else git_dir / rel


def _hash_size(common: Path) -> int:
    try:
        with open(common / "config", "rb") as f:
            text = f.read(1 << 20)
    except OSError:
        return 20
    at = text.lower().find(b"objectformat")
    return 32 if at >= 0 and text[at + 12 : at + 40].split(b"=", 1)[-1].strip().lower().startswith(b"sha256") else 20


def tracked_under(checkout: os.PathLike[str] | str, prefix: str) -> list[str]:
    """The paths git's index of ``checkout`` tracks that are ``prefix`` or lie below it.

    Empty when ``checkout`` has no git directory or no index (nothing committed yet).

    Raises:
        Unreadable: an index file exists that this reader does not understand.
    """
    git_dir = git_dir_of(Path(checkout))
    if git_dir is None:
        return []
    common = _common_dir(git_dir)
    files = [git_dir / "index"]
    for d in {git_dir, common}:
        try:
            files += [d / name for name in os.listdir(d) if name.startswith("sharedindex.")]
        except OSError:
            pass
    want = prefix.encode().rstrip(b"/")
    found: list[str] = []
    for path in files:
        for name in _scan(path, want, _hash_size(common)):
            text = name.decode("utf-8", "surrogateescape")
            if text not in found:
                found.append(text)
    return found


def _scan(path: Path, want: bytes, hash_size: int) -> list[bytes]:
    """Entries of one index file equal to ``want`` or below ``want/``, walking in path order."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise Unreadable(f"{path}: {exc.strerror or exc}") from None
    with f:
        reader = _Reader(f)
        try:
            head = reader.take(_HEADER)
        except Unreadable:
            raise Unreadable(f"{path}: too short for an index") from None
        signature, version, count = head[:4], int.from_bytes(head[4:8], "big"), int.from_bytes(head[8:12], "big")
        if signature != b"DIRC" or version not in (2, 3, 4):
            raise Unreadable(f"{path}: not a git index of version 2, 3 or 4")
        below = want + b"/"
        out: list[bytes] = []
        name = b""
        for _ in range(count):
            name = _next_name(reader, path, version, hash_size, name)
            if name == want or name.startswith(below):
                out.append(name)
            elif name > below:
                break  # sorted: nothing later can match
        return out


def _next_name(reader: _Reader, path: Path, version: int, hash_size: int, previous: bytes) -> bytes:
    """The path of the next entry (``previous``: the one before, which version 4 compresses against)."""
    head = reader.take(_FIXED + hash_size + 2)
    flags = int.from_bytes(head[_FIXED + hash_size :], "big")
    size = len(head)
    if flags & _EXTENDED:
        if version < 3:
            raise Unreadable(f"{path}: an extended entry in a version 2 index")
        reader.take(2)
        size += 2
    if version == 4:
        strip = reader.varint()
        if strip > len(previous):
            raise Unreadable(f"{path}: a path prefix longer than the path before it")
        return previous[: len(previous) - strip] + reader.until_nul()
    length = flags & _NAME_MASK
    name = reader.until_nul() if length == _NAME_MASK else reader.take(length)
    if length != _NAME_MASK:
        reader.take(1)  # its NUL
    size += len(name) + 1
    reader.take((8 - size % 8) % 8)  # padding to a multiple of 8 bytes
    return name


class _Reader:
    """Bytes from a file, read in chunks as the walk needs them."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.buf = b""
        self.at = 0

    def _fill(self, need: int) -> None:
        while len(self.buf) - self.at < need:
            chunk = self.f.read(max(_CHUNK, need))
            if not chunk:
                raise Unreadable("the index ends in the middle of an entry")
            self.buf = self.buf[self.at :] + chunk
            self.at = 0

    def take(self, n: int) -> bytes:
        self._fill(n)
        out = self.buf[self.at : self.at + n]
        self.at += n
        return out

    def until_nul(self) -> bytes:
        while True:
            end = self.buf.find(b"\0", self.at)
            if end >= 0:
                out = self.buf[self.at : end]
                self.at = end + 1
                return out
            self._fill(len(self.buf) - self.at + 1)

    def varint(self) -> int:
        """git's offset varint (each continuation adds one before shifting)."""
        byte = self.take(1)[0]
        value = byte & 0x7F
        while byte & 0x80:
            byte = self.take(1)[0]
            value = ((value + 1) << 7) | (byte & 0x7F)
        return value

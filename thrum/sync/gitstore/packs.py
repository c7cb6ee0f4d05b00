"""Pack files for the log's history, with deltas that follow how it grows.

Every sync that touches a log file stores a new blob of that file, and a new tree
of each directory above it. Successive versions of one path share almost all of
their bytes: a log file only grows at its end (a merge may insert in the middle),
a tree changes in an entry or two. So a version is stored as a delta against the
largest version of its path (blobs: one copy of the prefix they share, then the
new bytes) or against a recent version (trees), found by comparing common prefix
and suffix, which costs a memory compare instead of libgit2's general delta search
(measured in docs/design/merge.md: seconds per thousand objects there).

Rules:

1. The pack format is git's (version 2, ``OFS_DELTA`` against objects earlier in
   the same pack), the index git's version 2; both are written to temporary names,
   fsynced, and checked by libgit2 (every object read back and hashed) before they
   are renamed into ``objects/pack`` (the pack before its index).
2. Objects are grouped by path (the ``name`` given with each) or, for a blob with
   no name, by its first line; within a group the largest object comes first.
   A delta is kept only when it is under half the object's size, and chains stay
   at most `MAX_DEPTH` deep. Commits are stored whole.
3. Pure apart from the files it writes: objects come from a ``read`` callback.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import struct
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pygit2

from thrum.nofollow import open_regular

__all__ = ["MAX_DEPTH", "PackedObject", "delta", "read_index", "write_pack", "write_plain_pack"]

COMMIT, TREE, BLOB, TAG, OFS_DELTA = 1, 2, 3, 4, 6
MAX_DEPTH = 50
WINDOW = 3  # recent objects of a group tried as bases, besides the group's largest
LEVEL = 1  # zlib level: 2.3x faster than git's 6 on log files, for packs ~12% larger (measured)
_COPY_MAX = 0xFFFF


@dataclass
class PackedObject:
    """An object to pack: id (20 raw bytes), git type (1-4), size, path name or b""."""

    oid: bytes
    kind: int
    size: int
    name: bytes = b""


# --- deltas ----------------------------------------------------------------------------


def _common_prefix(a: memoryview, b: memoryview) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _common_suffix(a: memoryview, b: memoryview, limit: int) -> int:
    n = min(len(a), len(b), limit)
    if n == 0 or a[len(a) - n :] == b[len(b) - n :]:
        return n
    lo, hi = 0, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[len(a) - mid : len(a) - lo] == b[len(b) - mid : len(b) - lo]:
            lo = mid
        else:
            hi = mid
    return lo


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _copy(offset: int, size: int) -> bytes:
    op, args = 0x80, bytearray()
    for i in range(4):
        byte = (offset >> (8 * i)) & 0xFF
        if byte:
            op |= 1 << i
            args.append(byte)
    for i in range(3):
        byte = (size >> (8 * i)) & 0xFF
        if byte:
            op |= 0x10 << i
            args.append(byte)
    return bytes([op]) + bytes(args)


def delta(base: bytes, target: bytes, max_insert: int | None = None) -> bytes | None:
    """A git delta that rebuilds ``target`` from ``base``: the common prefix and suffix
    copied, the bytes between inserted (None when more than ``max_insert`` would be)."""
    a, b = memoryview(base), memoryview(target)
    p = _common_prefix(a, b)
    s = _common_suffix(a, b, min(len(a), len(b)) - p)
    if max_insert is not None and len(b) - p - s > max_insert:
        return None
    out = [_varint(len(base)), _varint(len(target))]
    for start in range(0, p, _COPY_MAX):
        out.append(_copy(start, min(_COPY_MAX, p - start)))
    middle = b[p : len(b) - s]
    for start in range(0, len(middle), 127):
        piece = middle[start : start + 127]
        out.append(bytes([len(piece)]))
        out.append(bytes(piece))
    for start in range(len(a) - s, len(a), _COPY_MAX):
        out.append(_copy(start, min(_COPY_MAX, len(a) - start)))
    return b"".join(out)


# --- writing -----------------------------------------------------------------------------


def _entry_header(kind: int, size: int) -> bytes:
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def _ofs(distance: int) -> bytes:
    out = [distance & 0x7F]
    distance >>= 7
    while distance:
        distance -= 1
        out.append(0x80 | (distance & 0x7F))
        distance >>= 7
    return bytes(reversed(out))


class _PackFile:
    def __init__(self, path: Path, count: int):
        self.f = open(path, "wb")
        self.sha = hashlib.sha1()
        self.offset = 0
        self.entries: list[tuple[bytes, int, int]] = []  # (oid, offset, crc32)
        self._write(b"PACK" + struct.pack(">II", 2, count))

    def _write(self, data: bytes) -> None:
        self.f.write(data)
        self.sha.update(data)
        self.offset += len(data)

    def add(self, oid: bytes, kind: int, data: bytes, base_offset: int | None = None, body: bytes | None = None) -> int:
        """Append one entry; ``body``: ``data`` already compressed (by another thread)."""
        start = self.offset
        if base_offset is None:
            head = _entry_header(kind, len(data))
        else:
            head = _entry_header(OFS_DELTA, len(data)) + _ofs(start - base_offset)
        if body is None:
            body = zlib.compress(data, LEVEL)
        self._write(head)
        self._write(body)
        self.entries.append((oid, start, zlib.crc32(body, zlib.crc32(head))))
        return start

    def finish(self) -> bytes:
        digest = self.sha.digest()
        self.f.write(digest)
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        return digest


def _write_index(path: Path, entries: list[tuple[bytes, int, int]], pack_sha: bytes) -> None:
    entries = sorted(entries)
    fanout = [0] * 256
    for oid, _, _ in entries:
        fanout[oid[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    small, large = [], []
    for _, offset, _ in entries:
        if offset < 0x80000000:
            small.append(offset)
        else:
            small.append(0x80000000 | len(large))
            large.append(offset)
    body = b"".join(
        [
            b"\xfftOc",
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            b"".join(oid for oid, _, _ in entries),
            struct.pack(f">{len(entries)}I", *(crc for _, _, crc in entries)),
            struct.pack(f">{len(small)}I", *small),
            struct.pack(f">{len(large)}Q", *large),
            pack_sha,
        ]
    )
    with open(path, "wb") as f:
        f.write(body + hashlib.sha1(body).digest())
        f.flush()
        os.fsync(f.fileno())


def _group_key(obj: PackedObject, data: bytes) -> bytes | None:
    if obj.name:
        return b"n:" + obj.name
    if obj.kind == BLOB:
        end = data.find(b"\n", 0, 4096)
        return b"l:" + hashlib.sha1(data[: end if end >= 0 else 4096]).digest()
    return None


def write_pack(objects_dir: Path, objects: Iterable[PackedObject], read: Callable[[bytes], bytes]) -> str:
    """Write the objects as one pack in ``objects_dir/pack``, verified; its name (``pack-<hex>``).

    ``read(oid)`` returns an object's bytes (called about twice per object; no
    object is held in memory beyond the bases of the group being written).

    Raises:
        ValueError: libgit2 reads back something other than what was packed.
    """
    objects = list(objects)
    groups: dict[bytes | None, list[PackedObject]] = {}
    for obj in objects:
        key = None
        if obj.kind in (TREE, BLOB):
            key = _group_key(obj, read(obj.oid) if not obj.name and obj.kind == BLOB else b"")
        groups.setdefault(key, []).append(obj)
    staging = objects_dir / f"thrum-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    (staging / "pack").mkdir(parents=True)
    tmp_pack = staging / "pack" / "tmp.pack"
    try:
        pack = _PackFile(tmp_pack, len(objects))
        offsets: dict[bytes, int] = {}
        for key, members in groups.items():
            if key is None:  # commits, tags, nameless trees: whole
                for obj in members:
                    offsets[obj.oid] = pack.add(obj.oid, obj.kind, read(obj.oid))
                continue
            _write_group(pack, offsets, sorted(members, key=lambda o: -o.size), read)
        pack_sha = pack.finish()
        name = f"pack-{pack_sha.hex()}"
        final_pack = staging / "pack" / f"{name}.pack"
        os.replace(tmp_pack, final_pack)
        _write_index(staging / "pack" / f"{name}.idx", pack.entries, pack_sha)
        _verify(staging, objects)
        target = objects_dir / "pack"
        target.mkdir(exist_ok=True)
        os.replace(final_pack, target / f"{name}.pack")
        os.replace(staging / "pack" / f"{name}.idx", target / f"{name}.idx")
        _fsync_dir(target)
        return name
    finally:
        for p in (staging / "pack").glob("*"):
            p.unlink(missing_ok=True)
        for d in (staging / "pack", staging):
            try:
                d.rmdir()
            except OSError:
                pass


def write_plain_pack(
    objects_dir: Path, objects: list[tuple[bytes, int, bytes]], compress: Callable[..., Iterable[bytes]] = map
) -> str:
    """Write ``objects`` (id, git type, bytes; ids computed by the caller from those
    bytes) as one pack of whole objects in ``objects_dir/pack``; its name.

    For the few new objects of one sync step (`objbatch`): no delta search, no
    staging directory and no read-back (the caller hashed the very bytes written).
    Temporary names in ``objects/pack`` itself, fsynced, renamed pack first, then the
    index (readers find a pack through its index), then the directory fsynced.
    ``compress`` maps ``zlib.compress`` over the bodies (a thread pool's ``map``).
    """
    target = objects_dir / "pack"
    target.mkdir(exist_ok=True)
    token = f"{os.getpid()}_{secrets.token_hex(4)}"
    tmp_pack, tmp_idx = target / f"tmp_pack_thrum_{token}", target / f"tmp_idx_thrum_{token}"
    placed: Path | None = None  # the pack, renamed into place before its index
    try:
        pack = _PackFile(tmp_pack, len(objects))
        bodies = compress(lambda data: zlib.compress(data, LEVEL), [data for _, _, data in objects])
        for (oid, kind, data), body in zip(objects, bodies):
            pack.add(oid, kind, data, body=body)
        pack_sha = pack.finish()
        _write_index(tmp_idx, pack.entries, pack_sha)
        name = f"pack-{pack_sha.hex()}"
        placed = target / f"{name}.pack"
        os.replace(tmp_pack, placed)
        os.replace(tmp_idx, target / f"{name}.idx")
        placed = None
        _fsync_dir(target)
        return name
    finally:
        tmp_pack.unlink(missing_ok=True)
        tmp_idx.unlink(missing_ok=True)
        if placed is not None:  # its index never arrived: no reader can use it, nothing would remove it
            placed.unlink(missing_ok=True)


def _write_group(pack: _PackFile, offsets: dict, members: list[PackedObject], read) -> None:
    """Largest first (whole); each next one a delta against the largest or a recent one."""
    largest = read(members[0].oid)
    first = members[0]
    offsets[first.oid] = pack.add(first.oid, first.kind, largest)
    window: list[tuple[bytes, bytes, int]] = [(first.oid, largest, 0)]  # (oid, data, depth)
    base_largest = (first.oid, largest, 0)
    for obj in members[1:]:
        data = read(obj.oid)
        best = None
        for cand in [base_largest] + window[-WINDOW:]:
            if cand[2] >= MAX_DEPTH:
                continue
            d = delta(cand[1], data, max_insert=len(data) // 2)
            if d is None:
                continue
            if best is None or len(d) < len(best[0]):
                best = (d, cand)
            if len(d) < 64:
                break
        if best is not None and len(best[0]) < len(data) // 2:
            d, cand = best
            offsets[obj.oid] = pack.add(obj.oid, obj.kind, d, base_offset=offsets[cand[0]])
            window.append((obj.oid, data, cand[2] + 1))
        else:
            offsets[obj.oid] = pack.add(obj.oid, obj.kind, data)
            window.append((obj.oid, data, 0))
        if len(window) > WINDOW:
            window.pop(0)


def _verify(staging: Path, objects: list[PackedObject]) -> None:
    """Read every object back through libgit2 from the new pack alone, and hash it."""
    odb = pygit2.Odb()
    odb.add_backend(pygit2.OdbBackendPack(str(staging)), 1)
    names = {COMMIT: b"commit", TREE: b"tree", BLOB: b"blob", TAG: b"tag"}
    for obj in objects:
        kind, data = odb.read(pygit2.Oid(raw=obj.oid))
        digest = hashlib.sha1(b"%s %d\0" % (names[int(kind)], len(data)))
        digest.update(data)
        if digest.digest() != obj.oid or int(kind) != obj.kind:
            raise ValueError(f"the new pack does not hold {obj.oid.hex()} as it should")


def read_index(path: Path) -> list[bytes]:
    """The object ids (raw) in a version-2 pack index.

    Raises:
        ValueError: not a version-2 index, or not a regular file (never read through a
            link or from a FIFO: a shared remote's pushers can plant either).
    """
    try:
        with open_regular(path) as (f, _):
            data = f.read()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    if data[:8] != b"\xfftOc\x00\x00\x00\x02":
        raise ValueError(f"{path} is not a version-2 pack index")
    count = struct.unpack(">I", data[8 + 255 * 4 : 8 + 256 * 4])[0]
    start = 8 + 256 * 4
    if len(data) < start + 20 * count:
        raise ValueError(f"{path} is truncated")
    return [data[start + 20 * i : start + 20 * (i + 1)] for i in range(count)]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

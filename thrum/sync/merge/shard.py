"""The per-file merge: pure bytes in, bytes out (no pygit2, no trio, no I/O).

A log file (one segment of a stream) is a JSONL file: one event per line. Rules:

1. A line's key is its ``event_id`` when the line is a valid JSON object whose
   ``event_id`` is a string, followed by ``"\\0"`` and the signer when the line
   carries ``"sig": {"by": <string>, ...}`` (docs/design/trust.md: another agent
   reusing an event id never displaces the original). Any other line's key is
   the line itself, stripped of surrounding whitespace, behind a ``0xFF`` byte
   that no event key starts with (UTF-8 never holds it), so a junk line can
   never take the key of an event. Malformed lines (a torn write, garbage
   someone pushed) are therefore kept and deduplicated like any other line,
   never dropped.
2. The merged file is the remote's lines in the remote's order, then the local
   lines whose key the remote lacks, in local order. A key that was already
   written is skipped (first occurrence wins), so the output has unique keys.
3. When both sides hold a key with different bytes (a line rewritten in place),
   ``prefer(remote_line, local_line)`` chooses which of the two is written, at
   the remote line's place. The default keeps the remote's line; the trust layer
   passes a resolver that keeps the copy whose signature verifies. A remote copy
   that replaces ours is *received* (folded like a new line): a replica that first
   saw a forged copy applies the verified one whenever it comes (issue 31).
4. Blank lines are dropped; every output line ends with ``\\n`` (a torn last line
   without a newline is kept and terminated).
5. The result depends only on the two inputs (and ``prefer``, a pure function).
   Because the remote comes first and every replica merges against the same
   remote, replicas that have seen the same events end up with byte-identical
   files once each has merged with that remote.

``received`` are the lines new to the local side (to fold into the projection),
``sent`` the local lines the remote lacked (what our push adds).

Fast path (:func:`merge_shard_fast`): when one side's bytes are a line-aligned
prefix of the other's (the usual case: only one side appended since the last
merge), the result is computed from the extra lines alone, given a
:class:`ShardKeys` summary of the shorter side. It returns exactly what
:func:`merge_shard` returns, or None when it cannot be sure (a repeated key, a
blank line, a hash collision): the caller then runs :func:`merge_shard`. It never
needs ``prefer``: a key both sides hold makes it give up.
"""

from __future__ import annotations

import json
from array import array
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass

from thrum.safejson import too_deep

try:  # ~4x faster; anything it rejects is handed to the stdlib parser (same keys either way)
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is optional here
    _orjson = None  # type: ignore[assignment]

__all__ = [
    "MergeResult",
    "NOT_AN_EVENT",
    "Prefer",
    "ShardKeys",
    "event_key",
    "merge_shard",
    "merge_shard_fast",
    "merge_shard_keyed",
    "remote_wins",
    "split_lines",
]


@dataclass(frozen=True)
class MergeResult:
    """Outcome of merging one shard. Lines in ``received``/``sent`` end with ``\\n``."""

    data: bytes
    received: list[bytes]
    sent: list[bytes]


Prefer = Callable[[bytes, bytes], bytes]
"""``prefer(remote_line, local_line)``: which of two lines with one key to keep (lines without ``\\n``)."""

NOT_AN_EVENT = b"\xff"  # starts the key of a line that is not an event; never the first byte of UTF-8


def remote_wins(remote_line: bytes, local_line: bytes) -> bytes:
    """The default resolver: the remote's copy of a line is kept (the order every replica sees)."""
    return remote_line


def event_key(line: bytes) -> bytes:
    """The dedup key of one line: ``event_id`` (UTF-8), plus ``\\0`` and ``sig.by`` when the line
    is signed; ``0xFF`` + the stripped line for anything that is not such an event."""
    stripped = line.strip()
    if not stripped.startswith(b"{") or _too_deep(stripped):
        return NOT_AN_EVENT + stripped
    obj = None
    if _orjson is not None:
        try:
            obj = _orjson.loads(stripped)
        except ValueError:
            obj = None
    if obj is None:
        try:
            obj = json.loads(stripped)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            return NOT_AN_EVENT + stripped
    if isinstance(obj, dict):
        event_id = obj.get("event_id")
        if isinstance(event_id, str):
            sig = obj.get("sig")
            signer = sig.get("by") if isinstance(sig, dict) else None
            if isinstance(signer, str):
                event_id = f"{event_id}\0{signer}"
            return event_id.encode("utf-8", "surrogatepass")
    return NOT_AN_EVENT + stripped


MAX_DEPTH = 128  # deeper lines are malformed: every parser (and Python stack) agrees on that


def _too_deep(s: bytes) -> bool:
    return too_deep(s, MAX_DEPTH)


def split_lines(data: bytes) -> list[bytes]:
    """Non-blank lines of ``data`` without their ``\\n`` (a torn last line included)."""
    return [line for line in data.split(b"\n") if line.strip()]


def merge_shard(remote: bytes, local: bytes, prefer: Prefer | None = None) -> MergeResult:
    """Merge the local bytes of one file into the remote's (see the module rules)."""
    return _merge(remote, local, prefer)[0]


def merge_shard_keyed(remote: bytes, local: bytes, prefer: Prefer | None = None) -> tuple[MergeResult, "ShardKeys"]:
    """:func:`merge_shard`, plus the :class:`ShardKeys` of the merged bytes."""
    result, written = _merge(remote, local, prefer)
    keys = ShardKeys()
    keys._absorb(written, len(result.data))
    return result, keys


def _merge(remote: bytes, local: bytes, prefer: Prefer | None) -> tuple[MergeResult, set[bytes]]:
    remote_lines = split_lines(remote)
    local_lines = split_lines(local)
    remote_keys = [event_key(line) for line in remote_lines]
    local_keys = _keys_reusing(local_lines, remote_lines, remote_keys, remote, local)

    local_by_key: dict[bytes, bytes] = {}
    for line, k in zip(local_lines, local_keys):
        local_by_key.setdefault(k, line)
    local_set = local_by_key.keys()
    written: set[bytes] = set()
    out: list[bytes] = []
    received: list[bytes] = []
    sent: list[bytes] = []
    for line, k in zip(remote_lines, remote_keys):
        if k in written:
            continue
        written.add(k)
        if k not in local_set:
            received.append(line + b"\n")
        else:
            ours = local_by_key[k]
            if ours != line:
                chosen = line if prefer is None else prefer(line, ours)
                if chosen is not line and chosen != line:
                    if chosen != ours:
                        raise ValueError("prefer() must return one of the two lines it was given")
                    line = ours
                    sent.append(ours + b"\n")  # our copy replaces the remote's
                else:
                    received.append(line + b"\n")  # the remote's copy replaces ours: new here, fold it
        out.append(line + b"\n")

    for line, k in zip(local_lines, local_keys):
        if k in written:
            continue
        written.add(k)
        sent.append(line + b"\n")
        out.append(line + b"\n")
    return MergeResult(data=b"".join(out), received=received, sent=sent), written


def _keys_reusing(
    lines: list[bytes], other_lines: list[bytes], other_keys: list[bytes], other: bytes, data: bytes
) -> list[bytes]:
    """Keys of ``lines``, parsing only the lines the other side does not share."""
    n = len(other_lines)
    if data.startswith(other) and (not other or other.endswith(b"\n")):
        # the other side is a line-aligned prefix of ours: same first n lines
        return other_keys + [event_key(line) for line in lines[n:]]
    if other.startswith(data) and (not data or data.endswith(b"\n")):
        return other_keys[: len(lines)]
    known = dict(zip(other_lines, other_keys))
    return [k if (k := known.get(line)) is not None else event_key(line) for line in lines]


# --- the fast path ------------------------------------------------------------------------


class ShardKeys:
    """A summary of the first ``size`` bytes of a shard: the hashes of its keys, and
    whether those bytes are *clean* (no blank line, no two keys with the same hash,
    ``size`` is 0 or the bytes end with ``\\n``). Clean bytes are their own merge
    result, so :func:`merge_shard_fast` never needs to read them again.

    Hashes are Python's ``hash`` of the key (this process only); 8 bytes per line.
    A hash that matches is never taken as proof of a repeated key: the fast path
    gives up and the exact merge decides.
    """

    __slots__ = ("size", "clean", "_sorted", "_recent")

    _CONSOLIDATE = 4096

    def __init__(self) -> None:
        self.size = 0
        self.clean = True
        self._sorted = array("q")
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, h: int) -> bool:
        if h in self._recent:
            return True
        i = bisect_left(self._sorted, h)
        return i < len(self._sorted) and self._sorted[i] == h

    def copy(self) -> "ShardKeys":
        other = ShardKeys()
        other.size, other.clean = self.size, self.clean
        other._sorted = array("q", self._sorted)
        other._recent = set(self._recent)
        return other

    def _add(self, h: int) -> bool:
        """Add one hash; False when it was already there."""
        if h in self:
            return False
        self._recent.add(h)
        if len(self._recent) > self._CONSOLIDATE:
            self._consolidate()
        return True

    def _consolidate(self) -> None:
        if self._recent:
            merged = sorted(self._sorted.tolist() + list(self._recent))
            self._sorted = array("q", merged)
            self._recent = set()

    def _absorb(self, keys: set[bytes], size: int) -> None:
        """Set to the (distinct) ``keys`` of clean bytes of length ``size``."""
        hashes = {hash(k) for k in keys}
        self._sorted = array("q", sorted(hashes))
        self._recent = set()
        self.size = size
        self.clean = len(hashes) == len(keys)

    def extend(self, data: bytes) -> None:
        """Take in ``data[self.size:]`` up to its last newline (``data`` is the whole shard
        and its first ``self.size`` bytes are the ones summarised so far)."""
        end = data.rfind(b"\n") + 1
        if end <= self.size:
            return
        chunk = data[self.size : end]
        lines = chunk.split(b"\n")
        lines.pop()  # the chunk ends with a newline
        add = self._add
        clean = self.clean
        if len(lines) > self._CONSOLIDATE:
            self._consolidate()
            fresh = set()
            for line in lines:
                if not line.strip():
                    clean = False
                    continue
                h = hash(event_key(line))
                if h in fresh or h in self:
                    clean = False
                fresh.add(h)
            self._sorted = array("q", sorted(set(self._sorted.tolist()) | fresh))
        else:
            for line in lines:
                if not line.strip():
                    clean = False
                elif not add(hash(event_key(line))):
                    clean = False
        self.clean = clean
        self.size = end


def shard_keys(data: bytes) -> ShardKeys:
    """The :class:`ShardKeys` of ``data`` up to its last newline."""
    keys = ShardKeys()
    keys.extend(data)
    return keys


def merge_shard_fast(
    remote: bytes, local: bytes, known: ShardKeys | None = None, prefer: Prefer | None = None
) -> tuple[MergeResult, ShardKeys] | None:
    """:func:`merge_shard` when one side is a line-aligned prefix of the other.

    ``prefer`` is accepted for symmetry and never called: a key both sides hold
    with different bytes makes the fast path give up (the exact merge decides).

    ``known`` summarises the first ``known.size`` bytes of ``local`` (the caller
    vouches for that; ``known.size`` must be 0 or end a line of ``local``). It is
    extended, not modified. Returns the merge result and the summary of its bytes,
    or None when the fast path does not apply or cannot be sure; then the caller
    runs :func:`merge_shard`, whose result this always equals.
    """
    if len(local) <= len(remote):
        if local and local[-1:] != b"\n":
            return None  # a torn local last line: it may be a piece of a remote line
        if not remote.startswith(local):
            return None
        keys = _summary(local, known)
        if keys is None:
            return None
        return _remote_appended(remote, local, keys)
    if remote and remote[-1:] != b"\n":
        return None
    if not local.startswith(remote):
        return None
    keys = _summary(local, known)
    if keys is None:
        return None
    return _local_appended(remote, local, keys)


def _summary(local: bytes, known: ShardKeys | None) -> ShardKeys | None:
    if known is None:
        keys = shard_keys(local)
    else:
        if known.size > len(local) or (known.size and local[known.size - 1 : known.size] != b"\n"):
            raise ValueError("ShardKeys does not describe a line-aligned prefix of this shard")
        keys = known.copy()
        keys.extend(local)
    return keys if keys.clean else None


def _remote_appended(remote: bytes, local: bytes, keys: ShardKeys) -> tuple[MergeResult, ShardKeys] | None:
    # merge_shard: the local lines come first in the remote, unique and all known
    # locally, so they are written as they are; each remote line after them is
    # written (and received) unless its key was already written.
    written: list[bytes] = []
    seen: dict[int, bytes] = {}
    for line in split_lines(remote[len(local) :]):
        k = event_key(line)
        h = hash(k)
        if h in keys:
            return None  # a repeated key, or a collision: let the exact merge decide
        if h in seen:
            if seen[h] != k:
                return None
            continue
        seen[h] = k
        written.append(line + b"\n")
    tail = b"".join(written)
    if len(local) + len(tail) == len(remote) and remote.endswith(tail):
        data = remote  # the usual case: every remote line was new (no copy of the shard)
    else:
        data = local + tail
    for h in seen:
        keys._add(h)
    keys.size = len(data)
    return MergeResult(data=data, received=written, sent=[]), keys


def _local_appended(remote: bytes, local: bytes, keys: ShardKeys) -> tuple[MergeResult, ShardKeys] | None:
    # merge_shard: the remote is the first lines of a clean local shard, so it is
    # written as it is; every local line after it has a key of its own (sent).
    sent = [line + b"\n" for line in split_lines(local[len(remote) : keys.size])]
    data = local[: keys.size]
    if keys.size < len(local):  # a torn last line: a line of its own, terminated
        torn = local[keys.size :]
        if torn.strip():
            h = hash(event_key(torn))
            if h in keys:
                return None
            keys._add(h)
            sent.append(torn.strip(b"\n") + b"\n")
            data = data + sent[-1]
        keys.size = len(data)
    return MergeResult(data=data, received=[], sent=sent), keys

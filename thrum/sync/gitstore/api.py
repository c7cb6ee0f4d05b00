"""What the sync needs from a git repository (`GitStore`), object ids, git's object formats.

Pure: no pygit2, no I/O. The cycle, the merge, the trees, the worktree and ``thrum
doctor`` reach git only through a `GitStore`; `libgit2.LibGit2Store` implements it over
pygit2 (the product), `memory.MemoryStore` in memory (tests of the cycle's logic). Both
pass one conformance suite (tests/sync/test_gitstore_conformance.py), which is what
makes a test on the fake worth as much as one on a repository.

Rules:

1. Objects are named by `Oid` (20 raw bytes), never by a library's type, so no
   pygit2 object crosses this interface.
2. Trees and the commits a sync step writes are built here as raw objects
   (`tree_object`, `commit_object`): one regular expression reads a tree and one join
   writes it, a fraction of pygit2's per-entry objects on directories with tens of
   thousands of entries (a hostile remote can push those); a commit built here is
   byte for byte the one libgit2 writes (the conformance suite checks it), so it can go
   into a step's pack (`objbatch`).
3. A ref moves by compare-and-swap (`GitStore.update_ref` with ``expected``): a
   writer that lost a race is told, never overwrites.
4. Reaching a remote (`GitStore.fetch`, `push`, `remote_heads`) takes the transport's
   `Credentials`; how a remote is reached is the transport's job (`thrum.sync.transport`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from ..transport.credentials import Credentials

__all__ = [
    "ANY",
    "AnyTarget",
    "EMPTY_TREE",
    "ZERO_OID",
    "Commit",
    "FileMode",
    "GitStore",
    "Kind",
    "ObjectWriter",
    "Oid",
    "PushOutcome",
    "Signature",
    "TreeEntries",
    "WriteBatch",
    "commit_object",
    "object_id",
    "parse_commit",
    "parse_tree",
    "tree_object",
]


@dataclass(frozen=True, slots=True)
class Oid:
    """A git object id: its 20 raw bytes. ``str(oid)`` is the 40-digit hex form."""

    raw: bytes

    def __post_init__(self) -> None:
        if len(self.raw) != 20:
            raise ValueError(f"an object id has 20 bytes, not {len(self.raw)}")

    @classmethod
    def from_hex(cls, text: str) -> Oid:
        """Raises: ValueError: not 40 hex digits."""
        if len(text) != 40:
            raise ValueError(f"an object id has 40 hex digits: {text!r}")
        return cls(bytes.fromhex(text))

    @property
    def hex(self) -> str:
        return self.raw.hex()

    def __str__(self) -> str:
        return self.raw.hex()

    def __repr__(self) -> str:
        return f"Oid({self.raw.hex()})"


ZERO_OID = Oid(b"\0" * 20)


class Kind(IntEnum):
    """An object's type, with git's numbers (a pack's and libgit2's)."""

    COMMIT = 1
    TREE = 2
    BLOB = 3
    TAG = 4


class FileMode(IntEnum):
    """The modes a tree entry may have."""

    TREE = 0o040000
    BLOB = 0o100644
    BLOB_EXECUTABLE = 0o100755
    LINK = 0o120000
    COMMIT = 0o160000  # a submodule


TreeEntries = dict[bytes, tuple[int, bytes]]
"""A tree's entries: name (bytes) -> (file mode, raw 20-byte object id)."""

_TYPE_NAMES = {Kind.COMMIT: b"commit", Kind.TREE: b"tree", Kind.BLOB: b"blob", Kind.TAG: b"tag"}


def object_id(kind: int, data: bytes) -> Oid:
    """The id git gives an object of type ``kind`` holding ``data``."""
    digest = hashlib.sha1(b"%s %d\0" % (_TYPE_NAMES[Kind(kind)], len(data)))
    digest.update(data)
    return Oid(digest.digest())


EMPTY_TREE = object_id(Kind.TREE, b"")

# --- trees --------------------------------------------------------------------------------

_ENTRY = re.compile(rb"([0-7]{5,6}) ([^\0]+)\0(.{20})", re.S)


def parse_tree(raw: bytes) -> TreeEntries:
    """The entries of a tree object's bytes."""
    return {m.group(2): (int(m.group(1), 8), m.group(3)) for m in _ENTRY.finditer(raw)}


def _order(item: tuple[bytes, tuple[int, bytes]]) -> bytes:
    name, (mode, _) = item
    return name + b"/" if mode == FileMode.TREE else name  # git sorts a directory as if it ended in "/"


def tree_object(entries: TreeEntries) -> bytes:
    """The bytes of a tree holding ``entries``, in git's order and mode spelling."""
    return b"".join(
        b"%o %s\0%s" % (mode, name, oid_raw) for name, (mode, oid_raw) in sorted(entries.items(), key=_order)
    )


# --- commits ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """An author or committer: name, e-mail, seconds since the epoch, UTC offset in minutes."""

    name: str
    email: str
    time: int
    offset: int = 0


@dataclass(frozen=True)
class Commit:
    """What the sync reads of a commit."""

    id: Oid
    tree: Oid
    parents: tuple[Oid, ...]


def _stamp(sig: Signature) -> bytes:
    minutes = abs(sig.offset)
    sign = b"-" if sig.offset < 0 else b"+"
    return b"%s <%s> %d %s%02d%02d" % (
        sig.name.encode(),
        sig.email.encode(),
        sig.time,
        sign,
        minutes // 60,
        minutes % 60,
    )


def commit_object(tree: Oid, parents: list[Oid], sig: Signature, message: str) -> bytes:
    """The bytes of a commit as libgit2's ``create_commit`` writes them (author and committer ``sig``)."""
    stamp = _stamp(sig)
    lines = [b"tree %s" % tree.hex.encode()]
    lines += [b"parent %s" % p.hex.encode() for p in parents]
    lines += [b"author " + stamp, b"committer " + stamp]
    return b"\n".join(lines) + b"\n\n" + message.encode()


def parse_commit(oid: Oid, raw: bytes) -> Commit:
    """The tree and parents of a commit object's bytes.

    Raises:
        ValueError: the bytes are not a commit's header.
    """
    header = raw.split(b"\n\n", 1)[0].split(b"\n")
    if not header or not header[0].startswith(b"tree "):
        raise ValueError(f"object {oid} is not a commit")
    try:
        tree = Oid.from_hex(header[0][5:].decode("ascii"))
        parents = tuple(Oid.from_hex(line[7:].decode("ascii")) for line in header[1:] if line.startswith(b"parent "))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"object {oid} is not a well-formed commit") from None
    return Commit(oid, tree, parents)


# --- the interface ------------------------------------------------------------------------


class ObjectWriter(Protocol):
    """Where new objects go: a store (`GitStore.write`) or a step's batch (`WriteBatch`)."""

    def write(self, kind: int, data: bytes, /) -> Oid: ...


class WriteBatch(ObjectWriter, Protocol):
    """The new objects of one sync step, stored together when `flush`\\ ed (or by `commit`).

    A batch never flushed stores nothing. Callers add children before parents and flush
    before a ref points at what they added."""

    def add(self, oid: Oid, kind: int, data: bytes, /) -> None:
        """Add an object whose id the caller computed (or verified) from ``data``."""
        ...

    def commit(self, tree: Oid, parents: list[Oid], sig: Signature, message: str, /) -> Oid:
        """The step's last object, its commit; then everything is flushed."""
        ...

    def flush(self) -> object: ...


@dataclass(frozen=True)
class PushOutcome:
    """How a push ended: ``landed`` (the remote holds our tip), else a lost race
    (``refused`` None: fetch, merge and push again) or a refusal (``refused``: the remote's
    own words, for one line)."""

    landed: bool
    refused: str | None = None


class AnyTarget:
    """The type of `ANY`."""

    def __repr__(self) -> str:
        return "ANY"


ANY = AnyTarget()
"""`GitStore.update_ref`'s ``expected`` when any current value will do."""


class GitStore(Protocol):
    """One git repository as the sync uses it. Not thread-safe unless a method says so:
    one store per thread that writes (pygit2's handles are not shared between threads)."""

    # -- objects

    def header(self, oid: Oid) -> tuple[int, int] | None:
        """(type, size) of an object from its header alone (nothing inflated); None when missing."""
        ...

    def read(self, oid: Oid) -> tuple[int, bytes]:
        """(type, bytes) of an object. Raises: KeyError: no such object."""
        ...

    def write(self, kind: int, data: bytes, /) -> Oid:
        """Store one object now; its id."""
        ...

    def batch(self) -> WriteBatch:
        """A batch for one sync step's new objects (see `WriteBatch`)."""
        ...

    # -- history

    def commit(self, oid: Oid) -> Commit:
        """Raises: KeyError: no such object. ValueError: it is not a commit."""
        ...

    def is_ancestor(self, ancestor: Oid, descendant: Oid) -> bool:
        """Whether ``descendant``'s history holds ``ancestor`` (a commit is not its own ancestor)."""
        ...

    def ancestors(self, tip: Oid) -> Iterator[Commit]:
        """``tip`` and every commit its history holds, each once, children before parents."""
        ...

    # -- refs

    def ref(self, name: str) -> Oid | None:
        """What the ref ``name`` points to, symbolic refs followed; None when it does not exist."""
        ...

    def symbolic_target(self, name: str) -> str | None:
        """The ref a symbolic ref (``HEAD``) names; None when ``name`` is direct or absent."""
        ...

    def update_ref(self, name: str, new: Oid, message: str, *, expected: Oid | None | AnyTarget = ANY) -> bool:
        """Point ``name`` at ``new`` if it still points at ``expected`` (None: it must not
        exist; `ANY`: whatever it holds); False, and nothing changed, when it does not."""
        ...

    def set_symbolic_ref(self, name: str, target: str, message: str) -> None:
        """Make ``name`` (``HEAD``) a symbolic ref to ``target``."""
        ...

    def delete_ref(self, name: str) -> None:
        """Remove ``name``; nothing when it does not exist."""
        ...

    # -- the worktree

    def changed_files(self) -> list[str]:
        """Files of the worktree that are new or differ from what its index records
        (paths relative to it, ``/``-separated); empty for a store without a worktree."""
        ...

    def record_stats(self, files: dict[str, tuple[Oid, os.stat_result]]) -> None:
        """Remember files just written or committed as unchanged (their stat data and blob
        id), so `changed_files` need not hash them again."""
        ...

    def refresh(self) -> bool:
        """Drop what the store cached of files that may have changed under it (packs a
        repack deleted); True when something was dropped. Cheap: called before each step."""
        ...

    # -- remotes (thread-safe: each opens what it needs)

    def remote_names(self) -> list[str]: ...

    def remote_url(self, name: str, *, push: bool = False) -> str | None:
        """The URL configured for remote ``name`` (the push URL when set and ``push``), as written."""
        ...

    def fetch(self, remote: str, refspecs: list[str], credentials: Credentials | None) -> dict[str, Oid]:
        """Fetch ``refspecs`` (``+src:dst``, named refs) from ``remote``: what their sources
        reach, nothing of the remote's other refs, no tags; the sources the remote holds
        (name -> tip), each destination set to its source's tip.

        Raises:
            AuthError, RemoteUnreachable, SyncError: one line each, naming the remote.
        """
        ...

    def remote_heads(self, remote: str, credentials: Credentials | None) -> dict[str, Oid]:
        """The refs ``remote`` advertises (one look, no objects). Raises: as `fetch`."""
        ...

    def push(self, remote: str, ref: str, credentials: Credentials | None, expected: Oid | None = None) -> PushOutcome:
        """Push our ``ref`` to the same name on ``remote``, as a fast-forward only; with
        ``expected``, only onto that remote tip (nothing is sent when it is elsewhere: a
        lost race).

        Raises:
            AuthError, RemoteUnreachable, SyncError: as `fetch`.
        """
        ...

"""The log's layout in git trees: what a fetched tree holds, what changed, and new trees.

A fetched tree is untrusted (anyone with push access writes it). Rules:

1. Only regular blobs (mode 100644 or 100755) at the layout's own paths
   (`thrum.events.is_log_path`: ``events/{n}.jsonl``, ``messages/{agent}/{n}.jsonl``,
   ``receipts/{agent}/{n}.jsonl``), at most `MAX_FILE_BYTES` each, are *log files*:
   the only entries ever read, merged or materialised. An object's type and size are
   read from its header before anything else (never the content of an oversized or
   mistyped one): an entry whose object is not what its mode says is ``wrong_type``.
2. Everything else is ignored and left in the tree untouched, counted by reason:
   ``symlink``, ``submodule``, ``wrong_type`` (a directory where a log file belongs,
   a file where a layout directory belongs, or another mode), ``unknown_path`` (a
   name the layout does not have; such a directory is never entered) and
   ``too_large``.
3. Work grows with what changed: two trees are compared by descending only into
   subtrees whose ids differ, and counts are remembered per tree id, so an
   unchanged directory (however large) costs nothing after the first time.
4. New trees are written only for the directories that hold a changed entry; the
   other entries are copied as they are (junk included).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass

from thrum.events.names import NAME_RE
from thrum.events.layout import AGENT_KINDS_OF_STREAMS as _AGENT_KINDS  # layout, not shards: no schema for `thrum init`
from thrum.events.layout import EVENTS_STREAM, segment_number

from .gitstore.api import EMPTY_TREE, FileMode, GitStore, Kind, ObjectWriter, Oid, TreeEntries, parse_tree, tree_object

__all__ = ["MAX_FILE_BYTES", "REASONS", "Change", "LayoutTrees", "Leaf"]

MAX_FILE_BYTES = 16 * 2**20  # a log file over this is never merged: honest segments stay near the 64 KiB cap
# Parsed tree entries kept (~200 bytes each): a few whole trees of tens of thousands of
# files; a sync reads only the directories it changed, its two heads' versions of them.
MAX_CACHED_ENTRIES = 100_000
MAX_CACHED_SIZES = 50_000  # blob sizes (least recently used out): every log file of a large tree
REGULAR = frozenset({int(FileMode.BLOB), int(FileMode.BLOB_EXECUTABLE)})
TREE = int(FileMode.TREE)
LINK = int(FileMode.LINK)
COMMIT = int(FileMode.COMMIT)
REASONS = ("symlink", "submodule", "wrong_type", "unknown_path", "too_large")

_Nested = dict[bytes, "Leaf | _Nested"]  # files to put in, by directory

# The layout's levels: what each directory may hold.
ROOT, KIND, STREAM = "root", "kind", "stream"


@dataclass(frozen=True)
class Leaf:
    """A log file in a tree: its blob id and mode."""

    oid: Oid
    mode: int


@dataclass(frozen=True)
class Change:
    """A log path whose file differs between two trees (None: no log file there)."""

    path: str
    old: Leaf | None
    new: Leaf | None


def _child_level(level: str, name: bytes) -> str | None:
    """The level of a directory entry, or None when the layout has no such name."""
    if level == ROOT:
        if name == EVENTS_STREAM.encode():
            return STREAM
        return KIND if name.decode("ascii", "replace") in _AGENT_KINDS else None
    if level == KIND:
        try:
            text = name.decode("ascii")
        except UnicodeDecodeError:
            return None
        return STREAM if NAME_RE.fullmatch(text) else None
    return None


def _is_segment(name: bytes) -> bool:
    try:
        return segment_number(name.decode("ascii")) is not None
    except UnicodeDecodeError:
        return False


class LayoutTrees:
    """Reads and writes the layout's trees in one store, remembering what it parsed.

    Not thread-safe: one per replicator, used from its sync thread.
    """

    def __init__(self, store: GitStore, max_cached_entries: int = MAX_CACHED_ENTRIES) -> None:
        self.store = store
        self._trees: OrderedDict[bytes, TreeEntries] = OrderedDict()
        self._cached_entries = 0
        self._max_cached = max_cached_entries
        self._counts: dict[bytes, Counter[str]] = {}  # tree id -> ignored entries below it, by reason
        self._headers: OrderedDict[bytes, tuple[int, int]] = OrderedDict()  # object id -> (type, size)

    # -- reading

    def entries(self, oid: Oid | None) -> TreeEntries:
        """The entries of a tree (empty for None), parsed once while it stays cached."""
        if oid is None or oid == EMPTY_TREE:
            return {}
        key = oid.raw
        found = self._trees.get(key)
        if found is not None:
            self._trees.move_to_end(key)
            return found
        if self.header(key)[0] != Kind.TREE:
            return {}  # missing, or not a tree (a planted object): as if the directory were absent
        found = parse_tree(self.store.read(oid)[1])
        self._trees[key] = found
        self._cached_entries += len(found)
        while self._cached_entries > self._max_cached and len(self._trees) > 1:
            _, dropped = self._trees.popitem(last=False)
            self._cached_entries -= len(dropped)
        return found

    def header(self, oid_raw: bytes) -> tuple[int, int]:
        """An object's (type, size) from its header alone, remembered (ids never change
        content); (0, 0) when it is missing."""
        found = self._headers.get(oid_raw)
        if found is not None:
            self._headers.move_to_end(oid_raw)
            return found
        found = self.store.header(Oid(oid_raw)) or (0, 0)
        self._headers[oid_raw] = found
        if len(self._headers) > MAX_CACHED_SIZES:
            self._headers.popitem(last=False)
        return found

    def size(self, oid_raw: bytes) -> int:
        """An object's size (0 when missing)."""
        return self.header(oid_raw)[1]

    def is_tree(self, oid_raw: bytes) -> bool:
        return self.header(oid_raw)[0] == Kind.TREE

    def _leaf(self, mode: int, oid_raw: bytes) -> tuple[Leaf | None, str | None]:
        """(the log file, None) or (None, why it is ignored) for an entry at a segment name."""
        if mode in REGULAR:
            kind, size = self.header(oid_raw)
            if kind != Kind.BLOB:
                return None, "wrong_type"
            if size > MAX_FILE_BYTES:
                return None, "too_large"
            return Leaf(Oid(oid_raw), mode), None
        return None, _mode_reason(mode)

    # -- what a tree holds

    def leaf_at(self, root: Oid, path: str) -> Leaf | None:
        """The log file at ``path`` in a tree, or None (absent, or ignored there)."""
        *dirs, name = path.split("/")
        tree: Oid | None = root
        for d in dirs:
            entry = self.entries(tree).get(d.encode())
            if entry is None or entry[0] != TREE:
                return None
            tree = Oid(entry[1])
        entry = self.entries(tree).get(name.encode())
        return None if entry is None else self._leaf(*entry)[0]

    def log_files(self, root: Oid) -> list[tuple[str, Leaf]]:
        """Every log file of a tree, in path order."""
        out: list[tuple[str, Leaf]] = []
        self._collect(root, ROOT, "", out)
        return out

    def _collect(self, tree: Oid, level: str, prefix: str, out: list[tuple[str, Leaf]]) -> None:
        for name, (mode, oid_raw) in sorted(self.entries(tree).items()):
            path = prefix + name.decode("ascii", "replace")
            if level == STREAM:
                if _is_segment(name):
                    leaf, _ = self._leaf(mode, oid_raw)
                    if leaf is not None:
                        out.append((path, leaf))
                continue
            child = _child_level(level, name)
            if child is not None and mode == TREE:
                self._collect(Oid(oid_raw), child, path + "/", out)

    def ignored(self, root: Oid) -> dict[str, int]:
        """Entries of a tree thrum ignores, by reason (rule 2); remembered per tree id."""
        counts = self._ignored(root, ROOT)
        # keep only what this tree uses, so the memory follows one tree, not the history
        keep: dict[bytes, Counter[str]] = {}
        self._reachable_counts(root, ROOT, keep)
        self._counts = keep
        return {reason: counts[reason] for reason in REASONS if counts[reason]}

    def _ignored(self, tree: Oid, level: str) -> Counter[str]:
        found = self._counts.get(tree.raw)
        if found is not None:
            return found
        counts: Counter[str] = Counter()
        for name, (mode, oid_raw) in self.entries(tree).items():
            if level == STREAM:
                if not _is_segment(name):
                    counts[_mode_reason(mode) if mode in (LINK, COMMIT) else "unknown_path"] += 1
                else:
                    _, reason = self._leaf(mode, oid_raw)
                    if reason:
                        counts[reason] += 1
                continue
            child = _child_level(level, name)
            if child is None:
                counts[_mode_reason(mode) if mode in (LINK, COMMIT) else "unknown_path"] += 1
            elif mode != TREE or not self.is_tree(oid_raw):
                counts[_mode_reason(mode) if mode != TREE else "wrong_type"] += 1
            else:
                counts.update(self._ignored(Oid(oid_raw), child))
        self._counts[tree.raw] = counts
        return counts

    def _reachable_counts(self, tree: Oid, level: str, keep: dict[bytes, Counter[str]]) -> None:
        keep[tree.raw] = self._counts[tree.raw]
        if level == STREAM:
            return
        for name, (mode, oid_raw) in self.entries(tree).items():
            child = _child_level(level, name)
            if child is not None and mode == TREE and oid_raw not in keep and oid_raw in self._counts:
                self._reachable_counts(Oid(oid_raw), child, keep)

    # -- what changed

    def changes(self, old: Oid | None, new: Oid | None, oversized: list[tuple[str, int]] | None = None) -> list[Change]:
        """The log paths whose log file differs between two trees, in path order.

        Only subtrees whose ids differ are entered (rule 3). ``oversized`` collects
        (path, size) of the files at a log path that ``new`` brings over `MAX_FILE_BYTES`
        (ignored as ``too_large``; an intake check refuses the tip that brings one).
        """
        out: list[Change] = []
        self._diff(old, new, ROOT, "", out, oversized)
        out.sort(key=lambda c: c.path)
        return out

    def _diff(
        self,
        old: Oid | None,
        new: Oid | None,
        level: str,
        prefix: str,
        out: list[Change],
        oversized: list[tuple[str, int]] | None = None,
    ) -> None:
        a, b = self.entries(old), self.entries(new)
        for name in a.keys() | b.keys():
            ea, eb = a.get(name), b.get(name)
            if ea == eb:
                continue
            if level == STREAM:
                if not _is_segment(name):
                    continue
                la = self._leaf(*ea)[0] if ea else None
                lb, why = self._leaf(*eb) if eb else (None, None)
                if la != lb:
                    out.append(Change(prefix + name.decode("ascii"), la, lb))
                if why == "too_large" and oversized is not None and eb is not None:
                    oversized.append((prefix + name.decode("ascii"), self.size(eb[1])))
                continue
            child = _child_level(level, name)
            if child is None:
                continue
            ta = Oid(ea[1]) if ea and ea[0] == TREE and self.is_tree(ea[1]) else None
            tb = Oid(eb[1]) if eb and eb[0] == TREE and self.is_tree(eb[1]) else None
            if ta != tb:
                self._diff(ta, tb, child, prefix + name.decode("ascii") + "/", out, oversized)

    # -- writing

    def with_files(self, base: Oid | None, files: dict[str, Leaf], odb: ObjectWriter | None = None) -> Oid:
        """``base`` with ``files`` (log paths) put in; only their directories are rewritten,
        into ``odb`` (the store by default; a sync step passes its batch)."""
        odb = odb if odb is not None else self.store
        if not files:
            return base if base is not None else odb.write(Kind.TREE, tree_object({}))
        nested: _Nested = {}
        for path, leaf in files.items():
            node = nested
            *dirs, name = path.split("/")
            for d in dirs:
                child = node.setdefault(d.encode(), {})
                if isinstance(child, Leaf):  # log paths never name a file and a directory alike
                    raise ValueError(f"{path}: {d} is a file among the files put in")
                node = child
            node[name.encode()] = leaf
        return self._write(base, nested, odb)

    def _write(self, base: Oid | None, nested: _Nested, odb: ObjectWriter) -> Oid:
        entries = dict(self.entries(base))
        for name, value in nested.items():
            if isinstance(value, Leaf):
                entries[name] = (value.mode, value.oid.raw)
            else:
                old = entries.get(name)
                sub = Oid(old[1]) if old is not None and old[0] == TREE else None
                entries[name] = (TREE, self._write(sub, value, odb).raw)  # replaces a non-tree in the way
        oid = odb.write(Kind.TREE, tree_object(entries))
        if oid.raw not in self._trees:
            self._trees[oid.raw] = entries
            self._cached_entries += len(entries)
        return oid


def _mode_reason(mode: int) -> str:
    if mode == LINK:
        return "symlink"
    if mode == COMMIT:
        return "submodule"
    return "wrong_type"

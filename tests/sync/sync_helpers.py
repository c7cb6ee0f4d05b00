"""Helpers for the sync tests: event lines, history checks, replicas of one remote.

A cluster is real (clones of one bare remote, `make_cluster`) where the test is about
git, packs, transports or the disk, and in memory (`make_memory_cluster`: the git store's
fake, proven by tests/sync/test_gitstore_conformance.py) where it is about the cycle's
logic: the merge, retries, races, convergence.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import pygit2

from fixtures.repos.builders import make_replicas
from fixtures.repos.fsck import fsck
from fixtures.repos.memory import memory_replica
from thrum.sync.cycle import run_cycle
from thrum.sync.gitstore.api import Commit, FileMode, GitStore, Kind, Oid, Signature, parse_tree
from thrum.sync.gitstore.libgit2 import LibGit2Store
from thrum.sync.gitstore.memory import MemoryStore
from thrum.sync.logaccess import PlainLog
from thrum.sync.replicate import Replicator
from thrum.sync.trees import LayoutTrees, Leaf
from thrum.sync.worktree import SYNC_REF, ensure_sync_worktree


def event(event_id: str, agent: str = "alice", **extra) -> bytes:
    """One event line (with its newline)."""
    obj = {"type": "message.create", "event_id": event_id, "agent_id": agent, **extra}
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def append(worktree: Path, shard: str, *lines: bytes) -> None:
    """Append raw lines to a shard the way the daemon does (no git involved)."""
    path = worktree / shard
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(b"".join(lines))


def tree_with(repo: pygit2.Repository, base: pygit2.Tree | None, entries: dict) -> pygit2.Oid:
    """A tree: ``base`` with ``entries`` ({path: bytes or (bytes/oid, mode)}) put in at nested paths."""
    by_top: dict[str, dict] = {}
    files = {}
    for path, value in entries.items():
        top, sep, rest = path.partition("/")
        if sep:
            by_top.setdefault(top, {})[rest] = value
        else:
            files[top] = value
    tb = repo.TreeBuilder(base) if base is not None else repo.TreeBuilder()
    for name, value in files.items():
        data, mode = value if isinstance(value, tuple) else (value, pygit2.enums.FileMode.BLOB)
        oid = data if isinstance(data, pygit2.Oid) else repo.create_blob(data)
        tb.insert(name, oid, mode)
    for top, sub in by_top.items():
        sub_base = None
        if base is not None and top in base and base[top].type_str == "tree":
            sub_base = base[top]
        tb.insert(top, tree_with(repo, sub_base, sub), pygit2.enums.FileMode.TREE)
    return tb.write()


def push_tree(remote: Path, entries: dict, message: str = "forged\n") -> pygit2.Oid:
    """Commit ``entries`` on top of the remote's a-sync tip, as someone with push access could."""
    bare = pygit2.Repository(str(remote))
    tip = bare[bare.references[SYNC_REF].target]
    sig = pygit2.Signature("x", "x@example.invalid", 1700000000, 0)
    return bare.create_commit(SYNC_REF, sig, sig, message, tree_with(bare, tip.tree, entries), [tip.id])


def push_files(store: GitStore, files: dict[str, bytes], message: str = "forged\n") -> Oid:
    """Commit log files ``files`` on top of ``store``'s a-sync tip (a remote in memory), as
    someone with push access could (`push_tree` for a remote on disk)."""
    tip = store.ref(SYNC_REF)
    assert tip is not None, f"no {SYNC_REF}"
    batch = store.batch()
    leaves = {path: Leaf(batch.write(Kind.BLOB, data), int(FileMode.BLOB)) for path, data in files.items()}
    tree = LayoutTrees(store).with_files(store.commit(tip).tree, leaves, batch)
    new = batch.commit(tree, [tip], Signature("x", "x@example.invalid", 1700000000, 0), message)
    assert store.update_ref(SYNC_REF, new, "forged", expected=tip)
    return new


def keys_of(data: bytes) -> list[bytes]:
    from thrum.sync.merge.shard import event_key, split_lines

    return [event_key(line) for line in split_lines(data)]


def committed(where: Path | GitStore, path: str, ref: str = SYNC_REF) -> bytes | None:
    """The bytes of log file ``path`` in ``ref``'s tree (None: not there)."""
    store = store_of(where)
    tip = store.ref(ref)
    assert tip is not None, f"no {ref}"
    leaf = LayoutTrees(store).leaf_at(store.commit(tip).tree, path)
    return None if leaf is None else store.read(leaf.oid)[1]


def committed_names(where: Path | GitStore, directory: str = "", ref: str = SYNC_REF) -> list[str]:
    """The names in ``directory`` (``a/b``; "" the root) of ``ref``'s tree ([]: no such directory)."""
    store = store_of(where)
    tip = store.ref(ref)
    assert tip is not None, f"no {ref}"
    tree = store.commit(tip).tree
    for part in filter(None, directory.split("/")):
        entry = parse_tree(store.read(tree)[1]).get(part.encode())
        if entry is None or entry[0] != FileMode.TREE:
            return []
        tree = Oid(entry[1])
    return sorted(name.decode() for name in parse_tree(store.read(tree)[1]))


def store_of(where: Path | GitStore) -> GitStore:
    """The git store at a path (a clone or a bare remote), or the store itself."""
    return LibGit2Store(where) if isinstance(where, Path) else where


def history(where: Path | GitStore, ref: str = SYNC_REF) -> list[Commit]:
    """Commits reachable from ``ref``, newest first, following every parent."""
    store = store_of(where)
    tip = store.ref(ref)
    assert tip is not None, f"no {ref}"
    return list(store.ancestors(tip))


def assert_linear_single_root(where: Path | GitStore, ref: str = SYNC_REF) -> None:
    commits = history(where, ref)
    assert all(len(c.parents) <= 1 for c in commits), "a merge commit on a-sync"
    assert sum(1 for c in commits if not c.parents) == 1, "more than one root"


def git_fsck(repo: Path, expect=()) -> None:
    """git itself checks every object and link of a store (the checkout's or a bare one)."""
    repo = Path(repo)
    git_dir = repo / ".git" if (repo / ".git").is_dir() else repo
    fsck(git_dir, expect)


class RecordingLog(PlainLog):
    """`PlainLog` that keeps what each merged chunk brought (``received``, per file, in
    order) and whether its lock was held when the chunk was handed over (``held``)."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.received: dict[str, list[bytes]] = {}
        self.held: list[bool] = []

    def apply_remote(self, writes, received):
        self.held.append(self._lock.locked())
        for path, lines in received.items():
            self.received.setdefault(path, []).extend(lines)
        return super().apply_remote(writes, received)

    def take_received(self) -> dict[str, list[bytes]]:
        got, self.received = self.received, {}
        return got


@dataclass
class Replica:
    repo: Path | None  # the clone (None: a replica in memory)
    worktree: Path
    replicator: Replicator
    files: RecordingLog

    @property
    def store(self) -> GitStore:
        return self.replicator.store

    def head(self) -> Oid | None:
        return self.store.ref(SYNC_REF)

    @property
    def lock(self) -> threading.Lock:
        return self.files.locked()

    def sync(self, **kw):
        return run_cycle(self.replicator, self.files, **kw)

    def commit(self, paths: list[str] | None = None) -> bool:
        """Commit what was appended: ``paths`` named, or (None) found by git's status."""
        if paths is not None:
            self.files.note_appended(paths)
        return self.replicator.commit_pending(self.files)

    def read(self, shard: str) -> bytes:
        path = self.worktree / shard
        return path.read_bytes() if path.exists() else b""


@dataclass
class Cluster:
    remote: Path | MemoryStore
    replicas: list[Replica]

    @property
    def remote_store(self) -> GitStore:
        return store_of(self.remote)

    def remote_tip(self) -> Oid | None:
        return self.remote_store.ref(SYNC_REF)

    @property
    def a(self) -> Replica:
        return self.replicas[0]

    @property
    def b(self) -> Replica:
        return self.replicas[1]

    @property
    def c(self) -> Replica:
        return self.replicas[2]


def make_cluster(tmp_path: Path, n: int) -> Cluster:
    pair = make_replicas(tmp_path, n)
    replicas = []
    for path in pair.clones:
        wt = ensure_sync_worktree(path)
        replicas.append(Replica(path, wt, Replicator(wt), RecordingLog(wt)))
    return Cluster(pair.remote, replicas)


def make_memory_cluster(tmp_path: Path, n: int) -> Cluster:
    """``n`` replicas of one remote, their git stores in memory (their log files on disk)."""
    remote = MemoryStore()
    replicas = []
    for i in range(n):
        wt = tmp_path / f"replica{i}"
        store = memory_replica(remote, wt)
        replicas.append(Replica(None, wt, Replicator(wt, store=store), RecordingLog(wt)))
    return Cluster(remote, replicas)

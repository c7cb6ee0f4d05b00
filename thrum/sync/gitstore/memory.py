"""`api.GitStore` in memory (`MemoryStore`): the cycle's and the merge's logic tested without disk.

A fake proven by the conformance suite (tests/sync/test_gitstore_conformance.py) that
`libgit2.LibGit2Store` passes too. Use it where a repository adds nothing to what a test
asserts (the merge, the cycle's retries, convergence); tests of transports, packs,
fsck or anything on disk use real repositories.

Rules:

1. Objects are kept by id, hashed as git hashes them (`api.object_id`); trees and
   commits are parsed with the same functions the sync writes them with.
2. A remote is another `MemoryStore`, named at construction. A fetch copies what the
   refspecs' sources reach (nothing of its other refs) and moves the tracking refs; a
   push is a fast-forward only, landing by compare-and-swap on the remote's ref, so two
   pushers racing each other behave as against a real remote: one lands, the other lost
   a race.
3. With a ``workdir`` the store has a worktree: `changed_files` compares its files with
   what `record_stats` recorded, else with the ``HEAD`` commit's tree.
4. Thread-safe: every method holds the store's lock (a push holds the remote's too).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

from thrum import nofollow

from .. import SyncError
from ..transport.credentials import Credentials
from .api import ANY, AnyTarget, Commit, FileMode, Kind, Oid, PushOutcome, Signature, commit_object, object_id
from .api import parse_commit, parse_tree

__all__ = ["MemoryBatch", "MemoryStore"]


class MemoryBatch:
    """An `api.WriteBatch` into a `MemoryStore`: objects wait until `flush`."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._waiting: dict[Oid, tuple[int, bytes]] = {}

    def write(self, kind: int, data: bytes, /) -> Oid:
        oid = object_id(kind, data)
        self._waiting[oid] = (int(kind), data)
        return oid

    def add(self, oid: Oid, kind: int, data: bytes, /) -> None:
        self._waiting[oid] = (int(kind), data)

    def commit(self, tree: Oid, parents: list[Oid], sig: Signature, message: str, /) -> Oid:
        oid = self.write(Kind.COMMIT, commit_object(tree, parents, sig, message))
        self.flush()
        return oid

    def flush(self) -> int:
        """Store what waits; how many objects that was."""
        n = len(self._waiting)
        with self.store.lock:
            self.store.objects.update(self._waiting)
        self._waiting.clear()
        return n


class MemoryStore:
    """A repository in memory. ``remotes`` names other stores as remotes (rule 2);
    ``workdir`` gives it a worktree (rule 3)."""

    def __init__(self, remotes: dict[str, MemoryStore] | None = None, workdir: Path | None = None) -> None:
        self.objects: dict[Oid, tuple[int, bytes]] = {}
        self.refs: dict[str, Oid] = {}
        self.symrefs: dict[str, str] = {}
        self.remotes = dict(remotes or {})
        self.workdir = workdir
        self.index: dict[str, Oid] = {}
        self.lock = threading.RLock()

    # -- objects

    def header(self, oid: Oid) -> tuple[int, int] | None:
        with self.lock:
            found = self.objects.get(oid)
        return None if found is None else (found[0], len(found[1]))

    def read(self, oid: Oid) -> tuple[int, bytes]:
        with self.lock:
            return self.objects[oid]

    def write(self, kind: int, data: bytes, /) -> Oid:
        oid = object_id(kind, data)
        with self.lock:
            self.objects[oid] = (int(kind), data)
        return oid

    def batch(self) -> MemoryBatch:
        return MemoryBatch(self)

    # -- history

    def commit(self, oid: Oid) -> Commit:
        kind, data = self.read(oid)
        if kind != Kind.COMMIT:
            raise ValueError(f"object {oid} is not a commit")
        return parse_commit(oid, data)

    def is_ancestor(self, ancestor: Oid, descendant: Oid) -> bool:
        if ancestor == descendant:
            return False
        try:
            return any(c.id == ancestor for c in self.ancestors(descendant))
        except (KeyError, ValueError):
            return False

    def ancestors(self, tip: Oid) -> Iterator[Commit]:
        # children before parents: a commit is given once every commit that names it as a parent was
        commits: dict[Oid, Commit] = {}
        todo = [tip]
        while todo:
            oid = todo.pop()
            if oid not in commits:
                commits[oid] = self.commit(oid)
                todo.extend(commits[oid].parents)
        waiting = {oid: 0 for oid in commits}
        for c in commits.values():
            for p in c.parents:
                waiting[p] += 1
        ready = [tip]
        while ready:
            c = commits[ready.pop()]
            yield c
            for p in reversed(c.parents):
                waiting[p] -= 1
                if waiting[p] == 0:
                    ready.append(p)

    # -- refs

    def ref(self, name: str) -> Oid | None:
        with self.lock:
            for _ in range(10):
                if name not in self.symrefs:
                    return self.refs.get(name)
                name = self.symrefs[name]
        return None

    def symbolic_target(self, name: str) -> str | None:
        with self.lock:
            return self.symrefs.get(name)

    def update_ref(self, name: str, new: Oid, message: str, *, expected: Oid | None | AnyTarget = ANY) -> bool:
        with self.lock:
            if not isinstance(expected, AnyTarget) and self.refs.get(name) != expected:
                return False
            self.refs[name] = new
            return True

    def set_symbolic_ref(self, name: str, target: str, message: str) -> None:
        with self.lock:
            self.refs.pop(name, None)
            self.symrefs[name] = target

    def delete_ref(self, name: str) -> None:
        with self.lock:
            self.refs.pop(name, None)
            self.symrefs.pop(name, None)

    # -- the worktree

    def _blob_at(self, tree: Oid, path: str) -> Oid | None:
        *dirs, name = path.split("/")
        for d in dirs:
            entry = parse_tree(self.read(tree)[1]).get(d.encode())
            if entry is None or entry[0] != FileMode.TREE:
                return None
            tree = Oid(entry[1])
        entry = parse_tree(self.read(tree)[1]).get(name.encode())
        return Oid(entry[1]) if entry is not None and entry[0] != FileMode.TREE else None

    def changed_files(self) -> list[str]:
        if self.workdir is None:
            return []
        head = self.ref("HEAD")
        tree = self.commit(head).tree if head is not None else None
        out = []
        for rel in nofollow.regular_files(self.workdir, lambda rel: True):
            found = nofollow.read_regular(self.workdir, rel)
            if found is None:
                continue
            known = self.index.get(rel) or (self._blob_at(tree, rel) if tree is not None else None)
            if known != object_id(Kind.BLOB, found[0]):
                out.append(rel)
        return sorted(out)

    def record_stats(self, files: dict[str, tuple[Oid, os.stat_result]]) -> None:
        with self.lock:
            self.index.update({path: oid for path, (oid, _) in files.items()})

    def refresh(self) -> bool:
        return False

    # -- remotes

    def remote_names(self) -> list[str]:
        return sorted(self.remotes)

    def remote_url(self, name: str, *, push: bool = False) -> str | None:
        return f"https://memory.invalid/{name}" if name in self.remotes else None

    def _remote(self, name: str) -> MemoryStore:
        try:
            return self.remotes[name]
        except KeyError:
            raise SyncError(f"no remote named {name} is configured") from None

    def fetch(self, remote: str, refspecs: list[str], credentials: Credentials | None) -> dict[str, Oid]:
        other = self._remote(remote)
        pairs = [spec.lstrip("+").partition(":")[::2] for spec in refspecs]
        with other.lock:
            fetched = {src: other.refs[src] for src, _ in pairs if src in other.refs}
            objects = other._reachable(list(fetched.values()), self.objects)
        with self.lock:
            self.objects.update(objects)
            for src, dst in pairs:
                if src in fetched and dst:
                    self.refs[dst] = fetched[src]
        return fetched

    def _reachable(self, tips: list[Oid], held: dict[Oid, tuple[int, bytes]]) -> dict[Oid, tuple[int, bytes]]:
        """The objects ``tips`` reach that ``held`` lacks (what the other side holds, it
        holds with all it reaches, as a real store)."""
        out: dict[Oid, tuple[int, bytes]] = {}
        todo = list(tips)
        while todo:
            oid = todo.pop()
            if oid in out or oid in held or oid not in self.objects:
                continue
            kind, data = out[oid] = self.objects[oid]
            if kind == Kind.COMMIT:
                commit = parse_commit(oid, data)
                todo += [commit.tree, *commit.parents]
            elif kind == Kind.TREE:
                todo += [Oid(raw) for mode, raw in parse_tree(data).values() if mode != FileMode.COMMIT]
        return out

    def remote_heads(self, remote: str, credentials: Credentials | None) -> dict[str, Oid]:
        other = self._remote(remote)
        with other.lock:
            return dict(other.refs)

    def push(self, remote: str, ref: str, credentials: Credentials | None, expected: Oid | None = None) -> PushOutcome:
        other = self._remote(remote)
        head = self.ref(ref)
        if head is None:
            return PushOutcome(False, f"{ref} does not exist here")
        with self.lock:
            objects = dict(self.objects)
        with other.lock:
            theirs = other.refs.get(ref)
            if expected is not None and theirs != expected:
                return PushOutcome(False)  # the remote is not at the tip this push may go onto
            if theirs is not None and theirs != head and not self.is_ancestor(theirs, head):
                return PushOutcome(False)  # not a fast-forward: they moved first
            other.objects.update(objects)
            return PushOutcome(other.update_ref(ref, head, "push", expected=theirs))

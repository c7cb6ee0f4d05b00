"""Helpers for the sync tests: event lines, history checks, replicas of one bare remote."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import pygit2

from fixtures.repos.builders import make_replicas
from thrum.sync.replicate import Replicator, run_cycle
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


def keys_of(data: bytes) -> list[bytes]:
    from thrum.sync.merge import event_key, split_lines

    return [event_key(line) for line in split_lines(data)]


def history(repo_path: Path, ref: str = SYNC_REF) -> list[pygit2.Commit]:
    """Commits reachable from ``ref``, newest first, following every parent."""
    repo = pygit2.Repository(str(repo_path))
    seen, out, todo = set(), [], [repo.references[ref].target]
    while todo:
        oid = todo.pop()
        if oid in seen:
            continue
        seen.add(oid)
        commit = repo[oid]
        out.append(commit)
        todo.extend(commit.parent_ids)
    return out


def assert_linear_single_root(repo_path: Path, ref: str = SYNC_REF) -> None:
    commits = history(repo_path, ref)
    assert all(len(c.parent_ids) <= 1 for c in commits), "a merge commit on a-sync"
    assert sum(1 for c in commits if not c.parent_ids) == 1, "more than one root"


@dataclass
class Replica:
    repo: Path
    worktree: Path
    replicator: Replicator
    lock: threading.Lock

    def locked(self):
        return self.lock

    def sync(self, **kw):
        return run_cycle(self.replicator, self.locked, **kw)

    def read(self, shard: str) -> bytes:
        path = self.worktree / shard
        return path.read_bytes() if path.exists() else b""


@dataclass
class Cluster:
    remote: Path
    replicas: list[Replica]

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
        replicas.append(Replica(path, wt, Replicator(wt), threading.Lock()))
    return Cluster(pair.remote, replicas)

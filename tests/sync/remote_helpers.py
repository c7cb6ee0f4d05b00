"""Replicas of one bare remote reached over a network URL (smart HTTP or SSH)."""

from __future__ import annotations

from pathlib import Path

import pygit2

from fixtures.repos.builders import make_replicas
from sync_helpers import Cluster, RecordingLog, Replica
from thrum.sync.transport.callbacks import remote_callbacks
from thrum.sync.transport.credentials import Credentials
from thrum.sync.replicate import Replicator
from thrum.sync.worktree import ensure_sync_worktree


def set_origin(clone: Path, url: str) -> None:
    pygit2.Repository(str(clone)).remotes.set_url("origin", url)


def net_cluster(base: Path, n: int, url_of, credentials: Credentials) -> Cluster:
    """``n`` clones of ``base/remote.git`` whose origin is ``url_of(remote_path)``."""
    pair = make_replicas(base, n)
    replicas = []
    for path in pair.clones:
        set_origin(path, url_of(pair.remote))
        wt = ensure_sync_worktree(path, callbacks=remote_callbacks(credentials))
        replicas.append(Replica(path, wt, Replicator(wt, credentials=credentials), RecordingLog(wt)))
    return Cluster(pair.remote, replicas)

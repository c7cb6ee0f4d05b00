"""What we know of the remote between cycles: its tip from one look, and what it lacks.

Rules:

1. A look (`RemoteView.tip`) is one ref advertisement, no objects. The daemon looks often while a conversation goes
   on and runs a cycle only when the tip moved (`thrum.daemon.pace`, issue 30).
2. What the remote lacks (`RemoteView.pending`) is counted from the log: the lines of
   the worktree's log files beyond the remote's tip as the last fetch or push left it
   (the remote-tracking ref), committed or not, seals left out. So a restarted daemon,
   or ``sync status`` with no daemon, knows it (issue 30, item 6).
3. A `RemoteView` opens its own store (a store is not shared between threads), so it
   never waits for the `Replicator`'s lock; the log's files are read through their
   owner (`logaccess.LogAccess`), under its lock.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from thrum.events.layout import is_log_path

from .gate import no_gate
from .gitstore.api import EMPTY_TREE, GitStore, Oid
from .gitstore.libgit2 import LibGit2Store
from .logaccess import LogAccess
from .transport.credentials import Credentials
from .trees import LayoutTrees
from .worktree import SYNC_REF, tracking_ref

__all__ = ["RemoteView"]

SEAL_MARK = b'"type":"seal"'


class RemoteView:
    """The remote ``remote_name`` as seen from the ``a-sync`` worktree at ``worktree_path``."""

    def __init__(
        self, worktree_path: os.PathLike[str] | str, remote_name: str = "origin", store: GitStore | None = None
    ) -> None:
        self.remote_name = remote_name
        self.store: GitStore = store if store is not None else LibGit2Store(Path(worktree_path))
        self.trees = LayoutTrees(self.store)

    def known_tip(self) -> Oid | None:
        """The remote's tip as the last fetch or push left it here (no network)."""
        return self.store.ref(tracking_ref(self.remote_name))

    def tip(
        self,
        credentials: Credentials | None = None,
        network: Callable[[str], AbstractContextManager[object]] = no_gate,
    ) -> Oid | None:
        """The remote's ``a-sync`` tip from one look (rule 1); None when it has none.
        ``network`` wraps the network operation (the daemon's gate and request count).

        Raises:
            AuthError, RemoteUnreachable, SyncError: one line each, as for a fetch.
        """
        with network("fetch"):  # a path remote too: the transport looks at it like any other
            heads = self.store.remote_heads(self.remote_name, credentials)
        return heads.get(SYNC_REF)

    def pending(self, log: LogAccess) -> int:
        """Events of the log the remote's known tip does not hold (rule 2)."""
        tracking = self.known_tip()
        remote_tree = self.store.commit(tracking).tree if tracking is not None else EMPTY_TREE
        head = self.store.ref("HEAD")
        head_tree = self.store.commit(head).tree if head is not None else EMPTY_TREE
        paths = {c.path for c in self.trees.changes(remote_tree, head_tree)}
        paths.update(p for p in self.store.changed_files() if is_log_path(p))
        total = 0
        for rel in sorted(paths):
            leaf = self.trees.leaf_at(remote_tree, rel)
            theirs = self.trees.size(leaf.oid.raw) if leaf is not None else 0
            with log.locked():
                try:
                    found = log.read(rel)
                except OSError:
                    continue
            if found is not None:
                total += sum(1 for line in found[0][theirs:].splitlines() if SEAL_MARK not in line)
        return total

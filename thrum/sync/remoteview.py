"""What we know of the remote between cycles: its tip from one look, and what it lacks.

Rules:

1. A look (`RemoteView.tip`) is one ref advertisement, no objects. The daemon looks often while a conversation goes
   on and runs a cycle only when the tip moved (`thrum.daemon.pace`, issue 30).
2. What the remote lacks (`RemoteView.pending`) is counted from the log: the lines of
   the worktree's log files beyond the remote's tip as the last fetch or push left it
   (the remote-tracking ref), committed or not, seals left out. So a restarted daemon,
   or ``sync status`` with no daemon, knows it (issue 30, item 6).
3. A `RemoteView` opens its own repository (pygit2 objects are not shared between
   threads), so it never waits for the `Replicator`'s lock; the log's files are read
   through their owner (`logaccess.LogAccess`), under its lock.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pygit2
from pygit2.enums import FileStatus

from thrum.events import is_log_path

from . import SyncError
from .gate import no_gate
from .gitstore.gitlib import EMPTY_TREE, objects_dir, open_repo
from .logaccess import LogAccess
from .transport.credentials import Credentials
from .transport.credentials import translate as _translate
from .transport.endpoint import resolved_url
from .transport.session import list_remote_heads
from .transport.urls import main_worktree_dir, redact_url
from .trees import LayoutTrees
from .worktree import SYNC_REF, tracking_ref

__all__ = ["RemoteView"]

_WT_CHANGED = FileStatus.WT_NEW | FileStatus.WT_MODIFIED | FileStatus.WT_TYPECHANGE
SEAL_MARK = b'"type":"seal"'


class RemoteView:
    """The remote ``remote_name`` as seen from the ``a-sync`` worktree at ``worktree_path``."""

    def __init__(self, worktree_path: os.PathLike | str, remote_name: str = "origin"):
        self.remote_name = remote_name
        self.repo = open_repo(Path(worktree_path))
        self.trees = LayoutTrees(self.repo)

    def known_tip(self) -> pygit2.Oid | None:
        """The remote's tip as the last fetch or push left it here (no network)."""
        ref = self.repo.references.get(tracking_ref(self.remote_name))
        return None if ref is None else ref.target

    def tip(
        self,
        credentials: Credentials | None = None,
        network: Callable[[str], AbstractContextManager] = no_gate,
    ) -> pygit2.Oid | None:
        """The remote's ``a-sync`` tip from one look (rule 1); None when it has none.
        ``network`` wraps the network operation (the daemon's gate and request count).

        Raises:
            AuthError, RemoteUnreachable, SyncError: one line each, as for a fetch.
        """
        try:
            configured = self.repo.remotes[self.remote_name].url or ""
        except KeyError:
            raise SyncError(f"no remote named {self.remote_name} is configured") from None
        base = main_worktree_dir(objects_dir(self.repo).parent)  # where a relative remote path starts
        url = resolved_url(configured, base)
        try:  # a path remote too: transport.session looks at it like any other
            with network("fetch"):
                heads = list_remote_heads(self.repo, self.remote_name, base, credentials)
        except SyncError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated at this boundary
            raise _translate(exc, self.remote_name, redact_url(url)) from exc
        return heads.get(SYNC_REF)

    def pending(self, log: LogAccess) -> int:
        """Events of the log the remote's known tip does not hold (rule 2)."""
        tracking = self.repo.references.get(tracking_ref(self.remote_name))
        remote_tree = self.repo[tracking.target].peel(pygit2.Commit).tree_id if tracking is not None else EMPTY_TREE
        head_tree = self.repo.head.peel(pygit2.Commit).tree_id
        paths = {c.path for c in self.trees.changes(remote_tree, head_tree)}
        status = self.repo.status(untracked_files="all")
        paths.update(p for p, flags in status.items() if flags & _WT_CHANGED and is_log_path(p))
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

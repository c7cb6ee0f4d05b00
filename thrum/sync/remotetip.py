"""What of a fetched remote tip is taken: a commit of the log, bringing a bounded amount.

The remote is untrusted: whoever can push (or write a path remote's directory) can point
``a-sync`` at any object and push any amount of compressible data. Before a merge reads
anything, two checks, each from object headers alone (nothing inflated):

1. The tip is a commit whose tree is a tree (finding 8 of issue 31: a planted object of
   the wrong type must not stop every replica's sync with a confusing error).
2. The log files that changed add up to at most the replica's intake bound,
   ``max_sync_intake_bytes`` (finding 9: a few KB pushed must not become gigabytes read,
   written and folded on every replica). Counted per sync, never over the history.
3. No file the tip brings at a log path is over `trees.MAX_FILE_BYTES`, the size no
   honest segment reaches (a 64 KiB cap; a line of at most 16 MiB on its own). Such a
   file used to be passed over while the rest of the tip was merged: a tip is taken
   whole or not at all (finding 9's residual). A file that was already in our own
   tree (pushed before this rule) is not new, and refuses nothing.

Each failing refuses the tip with one line naming the remote and what to do; the
cycle still commits local appends (`cycle.run_cycle`).
"""

from __future__ import annotations

from . import SyncError
from .gitstore.api import Commit, GitStore, Kind, Oid
from .trees import MAX_FILE_BYTES, Change, LayoutTrees
from .worktree import SYNC_BRANCH

__all__ = ["MAX_INTAKE_BYTES", "check_intake", "check_sizes", "log_commit"]

MAX_INTAKE_BYTES = 256 * 2**20  # the default of "max_sync_intake_bytes"
_TYPE_NAMES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def log_commit(store: GitStore, trees: LayoutTrees, tip: Oid, where: str) -> Commit:
    """The remote's tip as a commit, once its header says it is one whose tree is a tree
    (rule 1). ``where`` names the remote (``remote origin (/srv/team.git)``).

    Raises:
        SyncError: it is not (or it is missing); the tip is refused.
    """
    kind = trees.header(tip.raw)[0]
    if kind == 0:
        raise SyncError(f"remote tip {tip} is not in the object store; fetch first")
    commit = store.commit(tip) if kind == Kind.COMMIT else None
    tree_kind = trees.header(commit.tree.raw)[0] if commit is not None else None
    if commit is None or tree_kind != Kind.TREE:
        what = "a commit whose tree is not a tree" if commit is not None else f"a {_TYPE_NAMES.get(kind, 'thing')}"
        raise SyncError(
            f"{where}: its {SYNC_BRANCH} points to {what} ({tip}), not a commit of the log: its tip is refused "
            f"and local work goes on; someone with write access to the remote put it there: point "
            f"{SYNC_BRANCH} back at a commit there"
        )
    return commit


def check_intake(trees: LayoutTrees, changes: list[Change], limit: int, where: str) -> None:
    """Refuse a tip whose changed log files, by their headers, exceed ``limit`` bytes (rule 2).

    Raises:
        SyncError: the tip is refused.
    """
    intake = sum(trees.size(c.new.oid.raw) for c in changes if c.new is not None)
    if intake <= limit:
        return
    raise SyncError(
        f"{where}: its {SYNC_BRANCH} brings {_mib(intake)} of log files in one sync, more than the "
        f"{_mib(limit)} this replica takes in (max_sync_intake_bytes in .thrum/config.json): its tip is "
        f"refused and local work goes on; raise the bound if that much is honest traffic, else repair the remote"
    )


def check_sizes(oversized: list[tuple[str, int]], where: str) -> None:
    """Refuse a tip that brings a log file over `MAX_FILE_BYTES` (rule 3), by its header.

    Raises:
        SyncError: the tip is refused.
    """
    if not oversized:
        return
    path, size = max(oversized, key=lambda found: found[1])
    more = f" (and {len(oversized) - 1} more)" if len(oversized) > 1 else ""
    raise SyncError(
        f"{where}: its {SYNC_BRANCH} brings {path}, {_mib(size)}{more}, over the {_mib(MAX_FILE_BYTES)} no log "
        f"file of thrum's reaches: its tip is refused whole and local work goes on; someone with write access "
        f"to the remote put it there: remove that file from {SYNC_BRANCH} there"
    )

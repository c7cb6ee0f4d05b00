"""Rollback: the remote's ``a-sync`` no longer holds lines this replica pushed to it.

A remote (or whoever can force-push to it) can reset ``a-sync`` to an older commit,
or commit a version of a file without some lines. Every replica keeps what it has
and its merge pushes those lines back (docs/design/trust.md); this module makes that
visible (issue 25, item 4): after each successful push the replica records the tip
it left there (`PUSHED_REF`), and before each merge it compares that tip's log files
with the remote's new tip. Lines of the pushed tree the remote's lacks are *rolled
back*: reported with the writers and chain positions they held, in ``sync status``
(``chains.rollbacks``), ``thrum doctor`` and the web UI.

Only files that differ are read (`LayoutTrees.changes` enters only differing
subtrees), and a file the remote only appended to is recognised by its prefix: the id
of our version is the hash of the remote's first bytes (`treemerge.starts_with_blob`),
so our version is read only when it is not.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from ..events.codec import MalformedEvent, decode_line
from .gitstore.api import GitStore, Oid
from .treemerge import starts_with_blob
from .trees import LayoutTrees
from .worktree import SYNC_REF

__all__ = ["PUSHED_REF", "rolled_back"]

log = logging.getLogger(__name__)

PUSHED_REF = "refs/thrum/pushed-a-sync"
MAX_LINES = 100_000  # lines described at most (a remote that dropped everything is counted by files)


def pushed_tip(store: GitStore) -> Oid | None:
    return store.ref(PUSHED_REF)


def mark_pushed(store: GitStore, tip: Oid) -> None:
    if store.ref(PUSHED_REF) != tip:  # a cycle with nothing new leaves it where it is (no ref write)
        store.update_ref(PUSHED_REF, tip, "thrum: the remote holds this tip")


def rolled_back(store: GitStore, trees: LayoutTrees, remote_tip: Oid | None) -> dict[str, Any] | None:
    """What the remote lost of the tip this replica last pushed there, or None (nothing)."""
    pushed = pushed_tip(store)
    if pushed is None or pushed == remote_tip or remote_tip == store.ref(SYNC_REF):
        return None
    try:
        pushed_tree = store.commit(pushed).tree
        remote_tree = store.commit(remote_tip).tree if remote_tip is not None else None
    except (KeyError, ValueError):
        return None
    lost: dict[str, list[bytes]] = {}
    total = 0
    for change in trees.changes(pushed_tree, remote_tree):
        if change.old is None:
            continue
        new = store.read(change.new.oid)[1] if change.new is not None else b""
        if starts_with_blob(new, trees.size(change.old.oid.raw), change.old.oid.raw):
            continue  # only appended to: our version's id is that of its first bytes (nothing more read)
        old = store.read(change.old.oid)[1]
        if new.startswith(old):
            continue
        have = set(new.splitlines())
        gone = [line for line in old.splitlines() if line and line not in have]
        if gone:
            lost[change.path] = gone[: max(0, MAX_LINES - total)]
            total += len(gone)
    if not total:
        return None
    lost_report = _describe(lost, total, remote_tip is None)
    log.warning("%s", lost_report["text"])
    return lost_report


def _describe(lost: dict[str, list[bytes]], total: int, branch_gone: bool) -> dict[str, Any]:
    seqs: dict[str, list[int]] = defaultdict(list)
    unchained = 0
    for lines in lost.values():
        for line in lines:
            try:
                d = decode_line(line)
            except MalformedEvent:
                continue
            sig = d.get("sig")
            chain = d.get("chain")
            if isinstance(sig, dict) and chain is not None and d.get("type") != "seal":
                seqs[str(sig.get("by"))].append(chain["seq"])
            elif d.get("type") != "seal":
                unchained += 1
    writers: list[dict[str, Any]] = []
    for signer in sorted(seqs):
        ranges = _ranges(sorted(set(seqs[signer])))
        writers.append(
            {
                "signer": signer,
                "ranges": [[lo, hi] for lo, hi in ranges],
                "text": f"{signer} " + ", ".join(f"#{lo}" if lo == hi else f"#{lo}–{hi}" for lo, hi in ranges),
            }
        )
    where = "; ".join(w["text"] for w in writers) or f"{unchained} line(s) written before chains"
    how = "the remote's a-sync is gone" if branch_gone else "the remote's a-sync no longer holds"
    return {
        "lines": total,
        "files": sorted(lost),
        "writers": writers,
        "text": f"rollback: {how} {total} line(s) this replica pushed ({where}); pushed back",
    }


def _ranges(values: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out

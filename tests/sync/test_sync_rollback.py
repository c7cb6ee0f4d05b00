"""What the remote lost of the tip this replica pushed (`thrum.sync.rollback`), on the
in-memory store: the lines reported, and no report when the remote only appended."""

from __future__ import annotations

import functools
import json

from thrum import events as ev
from thrum.sync.gitstore.api import FileMode, Kind, Oid, Signature
from thrum.sync.gitstore.memory import MemoryStore
from thrum.sync.rollback import PUSHED_REF, mark_pushed, rolled_back
from thrum.sync.trees import LayoutTrees, Leaf
from thrum.sync.worktree import SYNC_REF

SIG = Signature("thrum", "thrum@localhost", 1704067200, 0)
PATH = "messages/alice/000001.jsonl"


@functools.cache
def line(seq: int) -> bytes:
    """A line of alice's chain at ``seq`` (the report reads writers and positions; nothing verifies here)."""
    d = ev.SessionStart(agent_id="alice").to_dict()
    d["chain"] = {"seq": seq} if seq == 1 else {"seq": seq, "prev": "p" * 22}
    d["sig"] = {"by": "alice", "alg": "ed25519", "key": "k", "value": "v"}
    return json.dumps(d).encode() + b"\n"


def commit(store: MemoryStore, trees: LayoutTrees, files: dict[str, bytes]) -> Oid:
    batch = store.batch()
    leaves = {p: Leaf(batch.write(Kind.BLOB, data), int(FileMode.BLOB)) for p, data in files.items()}
    return batch.commit(trees.with_files(None, leaves, batch), [], SIG, "m\n")


def setup(pushed: dict[str, bytes]) -> tuple[MemoryStore, LayoutTrees]:
    store = MemoryStore()
    trees = LayoutTrees(store)
    tip = commit(store, trees, pushed)
    store.update_ref(SYNC_REF, tip, "ours")
    mark_pushed(store, tip)
    return store, trees


def test_a_remote_that_only_appended_lost_nothing():
    store, trees = setup({PATH: line(1) + line(2)})
    remote = commit(store, trees, {PATH: line(1) + line(2) + line(3), "events/000001.jsonl": line(9)})
    assert rolled_back(store, trees, remote) is None


def test_lines_the_remote_dropped_or_rewrote_are_reported_by_writer_and_position():
    store, trees = setup({PATH: line(1) + line(2) + line(3) + line(4), "events/000001.jsonl": line(7)})
    # alice's file cut back and rewritten in the middle; the events file gone altogether
    remote = commit(store, trees, {PATH: line(1) + line(3) + b'{"x":1}\n'})
    lost = rolled_back(store, trees, remote)
    assert lost is not None and lost["lines"] == 3
    assert lost["files"] == ["events/000001.jsonl", PATH]
    assert [(w["signer"], w["ranges"]) for w in lost["writers"]] == [("alice", [[2, 2], [4, 4], [7, 7]])]


def test_a_remote_that_reset_to_an_older_tip_lost_what_came_after_it():
    store, trees = setup({PATH: line(1) + line(2) + line(3)})
    older = commit(store, trees, {PATH: line(1)})
    lost = rolled_back(store, trees, older)
    assert lost is not None and lost["writers"][0]["ranges"] == [[2, 3]]


def test_the_tip_pushed_or_the_branch_we_hold_is_no_rollback():
    store, trees = setup({PATH: line(1)})
    pushed = store.ref(PUSHED_REF)
    assert pushed is not None and rolled_back(store, trees, pushed) is None
    mark_pushed(store, pushed)  # again: nothing moves
    assert store.ref(PUSHED_REF) == pushed

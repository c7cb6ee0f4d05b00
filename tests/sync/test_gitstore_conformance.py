"""One conformance suite for the git store's interface (`thrum.sync.gitstore.api.GitStore`).

Every test runs on the libgit2 store (real repositories in a temp dir, git fsck at the
end) and on the in-memory fake: what the fake does here is what tests of the cycle on
the fake may rely on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures.repos.builders import make_replicas
from thrum.sync import SyncError
from thrum.sync.gitstore.api import (
    ANY,
    EMPTY_TREE,
    FileMode,
    GitStore,
    Kind,
    Oid,
    Signature,
    object_id,
    parse_tree,
    tree_object,
)
from thrum.sync.gitstore.libgit2 import LibGit2Store
from thrum.sync.gitstore.memory import MemoryStore

SIG = Signature("thrum", "thrum@localhost", 1704067200, 0)
REF = "refs/heads/a-sync"


@dataclass
class Pair:
    """A store with a worktree (``local``) and its remote ``origin`` (``remote``)."""

    local: GitStore
    remote: GitStore
    workdir: Path


@pytest.fixture(params=["libgit2", "memory"])
def pair(request, tmp_path) -> Pair:
    if request.param == "libgit2":
        replicas = make_replicas(tmp_path, 1)
        clone = replicas.clones[0]
        return Pair(LibGit2Store(clone), LibGit2Store(replicas.remote), clone)
    remote = MemoryStore()
    workdir = tmp_path / "wt"
    workdir.mkdir()
    return Pair(MemoryStore({"origin": remote}, workdir), remote, workdir)


def commit_on(store: GitStore, files: dict[bytes, bytes], parents: list[Oid], message: str = "m\n") -> Oid:
    """A commit of a flat tree holding ``files``, written through a batch."""
    batch = store.batch()
    entries = {name: (int(FileMode.BLOB), batch.write(Kind.BLOB, data).raw) for name, data in files.items()}
    tree = batch.write(Kind.TREE, tree_object(entries))
    return batch.commit(tree, parents, SIG, message)


# -- objects


def test_objects_are_named_as_git_names_them_and_read_back(pair):
    s = pair.local
    oid = s.write(Kind.BLOB, b"hello\n")
    assert str(oid) == "ce013625030ba8dba906f756967f9e9ca394464a" == str(object_id(Kind.BLOB, b"hello\n"))
    assert s.header(oid) == (Kind.BLOB, 6)
    assert s.read(oid) == (Kind.BLOB, b"hello\n")
    assert str(EMPTY_TREE) == "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def test_a_missing_object_has_no_header_and_cannot_be_read(pair):
    missing = object_id(Kind.BLOB, b"never written")
    assert pair.local.header(missing) is None
    with pytest.raises(KeyError):
        pair.local.read(missing)


def test_a_tree_written_raw_reads_back_in_gits_order(pair):
    s = pair.local
    blob = s.write(Kind.BLOB, b"x\n")
    sub = s.write(Kind.TREE, tree_object({b"f": (int(FileMode.BLOB), blob.raw)}))
    entries = {b"a.b": (int(FileMode.BLOB), blob.raw), b"a": (int(FileMode.TREE), sub.raw)}
    tree = s.write(Kind.TREE, tree_object(entries))
    kind, raw = s.read(tree)
    assert kind == Kind.TREE and parse_tree(raw) == entries
    assert raw.index(b"a.b\0") < raw.index(b"a\0")  # git sorts a directory as if it ended in "/"


def test_a_batch_stores_nothing_until_flushed_and_its_commit_flushes(pair):
    s = pair.local
    batch = s.batch()
    blob = batch.write(Kind.BLOB, b"waiting\n")
    assert s.header(blob) is None
    batch.flush()
    assert s.read(blob) == (Kind.BLOB, b"waiting\n")
    tip = commit_on(s, {b"f": b"1\n"}, [])
    assert s.header(tip) is not None and s.commit(tip).parents == ()


# -- history


def test_a_commit_reads_back_with_its_tree_and_parents(pair):
    s = pair.local
    root = commit_on(s, {b"f": b"1\n"}, [])
    child = commit_on(s, {b"f": b"2\n"}, [root])
    c = s.commit(child)
    assert c.id == child and c.parents == (root,)
    assert parse_tree(s.read(c.tree)[1])[b"f"][1] == object_id(Kind.BLOB, b"2\n").raw
    with pytest.raises(ValueError):
        s.commit(c.tree)
    with pytest.raises(KeyError):
        s.commit(object_id(Kind.COMMIT, b"tree 0\n"))


def test_ancestry_and_the_walk_children_before_parents(pair):
    s = pair.local
    root = commit_on(s, {b"f": b"1\n"}, [])
    left = commit_on(s, {b"f": b"2\n"}, [root])
    right = commit_on(s, {b"g": b"3\n"}, [root])
    merge = commit_on(s, {b"f": b"2\n", b"g": b"3\n"}, [left, right])
    assert s.is_ancestor(root, merge) and s.is_ancestor(right, merge)
    assert not s.is_ancestor(merge, root) and not s.is_ancestor(left, right) and not s.is_ancestor(root, root)
    order = [c.id for c in s.ancestors(merge)]
    assert sorted(order, key=str) == sorted([root, left, right, merge], key=str)
    assert order[0] == merge and order[-1] == root


# -- refs


def test_refs_move_by_compare_and_swap(pair):
    s = pair.local
    one = commit_on(s, {b"f": b"1\n"}, [])
    two = commit_on(s, {b"f": b"2\n"}, [one])
    assert s.ref(REF) is None
    assert s.update_ref(REF, one, "create", expected=None)
    assert s.ref(REF) == one
    assert not s.update_ref(REF, two, "must not exist", expected=None)
    assert not s.update_ref(REF, two, "stale", expected=two)
    assert s.ref(REF) == one
    assert s.update_ref(REF, two, "swap", expected=one) and s.ref(REF) == two
    assert s.update_ref(REF, one, "any", expected=ANY) and s.ref(REF) == one
    s.delete_ref(REF)
    s.delete_ref(REF)  # nothing to delete: no error
    assert s.ref(REF) is None


def test_a_symbolic_ref_is_followed(pair):
    s = pair.local
    tip = commit_on(s, {b"f": b"1\n"}, [])
    s.update_ref(REF, tip, "create")
    s.set_symbolic_ref("HEAD", REF, "point HEAD")
    assert s.symbolic_target("HEAD") == REF and s.symbolic_target(REF) is None
    assert s.ref("HEAD") == tip


# -- the worktree


def test_changed_files_are_new_or_modified_files_until_recorded(pair):
    s = pair.local
    tip = commit_on(s, {}, [])
    s.update_ref(REF, tip, "create")
    s.set_symbolic_ref("HEAD", REF, "point HEAD")
    for name in pair.local.changed_files():  # the fixture's own files: recorded as they are
        path = pair.workdir / name
        s.record_stats({name: (s.write(Kind.BLOB, path.read_bytes()), path.stat())})
    assert s.changed_files() == []
    shard = pair.workdir / "events" / "000001.jsonl"
    shard.parent.mkdir()
    shard.write_bytes(b"one\n")
    assert s.changed_files() == ["events/000001.jsonl"]
    blob = s.write(Kind.BLOB, b"one\n")
    s.record_stats({"events/000001.jsonl": (blob, shard.stat())})
    assert s.changed_files() == []
    with open(shard, "ab") as f:
        f.write(b"two, a longer line\n")
    assert s.changed_files() == ["events/000001.jsonl"]


# -- remotes


def test_a_fetch_brings_the_remotes_objects_and_moves_the_tracking_ref(pair):
    r = pair.remote
    tip = commit_on(r, {b"f": b"remote\n"}, [])
    r.update_ref(REF, tip, "remote")
    assert "origin" in pair.local.remote_names() and pair.local.remote_url("origin")
    heads = pair.local.fetch("origin", [f"+{REF}:refs/remotes/origin/a-sync"], None)
    assert heads[REF] == tip
    assert pair.local.ref("refs/remotes/origin/a-sync") == tip
    tree = pair.local.commit(tip).tree
    assert parse_tree(pair.local.read(tree)[1])[b"f"][1] == object_id(Kind.BLOB, b"remote\n").raw
    assert pair.local.remote_heads("origin", None)[REF] == tip


def test_a_fetch_takes_what_its_refs_reach_and_nothing_of_the_remotes_other_refs(pair):
    """The remote is the project's code remote: its other branches stay there."""
    r = pair.remote
    tip = commit_on(r, {b"f": b"log\n"}, [])
    r.update_ref(REF, tip, "remote")
    code = commit_on(r, {b"main.c": b"int main;\n"}, [])
    r.update_ref("refs/heads/feature", code, "code")
    heads = pair.local.fetch("origin", [f"+{REF}:refs/remotes/origin/a-sync"], None)
    assert heads == {REF: tip}
    assert pair.local.ref("refs/remotes/origin/a-sync") == tip and pair.local.header(tip) is not None
    assert pair.local.header(code) is None and pair.local.ref("refs/remotes/origin/feature") is None
    assert pair.local.header(object_id(Kind.BLOB, b"int main;\n")) is None


def test_a_push_lands_as_a_fast_forward_and_loses_a_race_otherwise(pair):
    s, r = pair.local, pair.remote
    base = commit_on(s, {b"f": b"1\n"}, [])
    s.update_ref(REF, base, "base")
    assert s.push("origin", REF, None).landed
    assert r.ref(REF) == base and r.header(base) is not None
    theirs = commit_on(r, {b"f": b"them\n"}, [base])  # another replica pushed first
    r.update_ref(REF, theirs, "theirs")
    ours = commit_on(s, {b"f": b"us\n"}, [base])
    s.update_ref(REF, ours, "ours")
    outcome = s.push("origin", REF, None)
    assert not outcome.landed and outcome.refused is None  # a lost race: fetch, merge, push again
    assert r.ref(REF) == theirs
    s.fetch("origin", [f"+{REF}:refs/remotes/origin/a-sync"], None)
    merged = commit_on(s, {b"f": b"them\nus\n"}, [theirs])
    s.update_ref(REF, merged, "merged")
    assert s.push("origin", REF, None).landed and r.ref(REF) == merged


def test_an_unknown_remote_is_one_line(pair):
    with pytest.raises(SyncError, match="no remote named upstream"):
        pair.local.fetch("upstream", [f"+{REF}:{REF}"], None)
    assert pair.local.remote_url("upstream") is None


def test_libgit2_compare_and_swap_waits_for_no_one_holding_the_refs_lock(tmp_path):
    """Another process moving the ref holds git's ``.lock`` file: the swap fails, nothing changes."""
    replicas = make_replicas(tmp_path, 1)
    s = LibGit2Store(replicas.clones[0])
    one = commit_on(s, {b"f": b"1\n"}, [])
    two = commit_on(s, {b"f": b"2\n"}, [one])
    assert s.update_ref(REF, one, "create", expected=None)
    lock = s.git_dir / "refs" / "heads" / "a-sync.lock"
    lock.write_text("held by another writer\n")
    assert not s.update_ref(REF, two, "swap", expected=one)
    lock.unlink()
    assert s.ref(REF) == one
    assert s.update_ref(REF, two, "swap", expected=one) and s.ref(REF) == two

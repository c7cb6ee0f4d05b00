"""Direct object copying with a remote on a local filesystem, the merge's fast path in a
real replica (key summaries kept between cycles), and index entries written without hashing."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pygit2
import pytest

from sync_helpers import append, assert_linear_single_root, event, git_fsck, push_tree
from thrum.sync import SyncError
from thrum.sync.localremote import local_remote_path, open_local_remote
from thrum.sync.cycle import run_cycle
from thrum.sync.logaccess import PlainLog
from thrum.sync.merge.shard import merge_shard
from thrum.sync.replicate import Replicator
from thrum.sync.worktree import SYNC_REF

SHARD = "messages/alice/000001.jsonl"


def packs(repo: Path) -> set[str]:
    d = repo / "objects" / "pack"
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def loose_path(repo: Path, oid) -> Path:
    h = str(oid)
    return repo / "objects" / h[:2] / h[2:]


def remote_blob(cluster, path: str):
    bare = pygit2.Repository(str(cluster.remote))
    return bare[bare.references[SYNC_REF].target].tree[path]


def test_local_remote_path_accepts_absolute_paths_and_file_urls(tmp_path):
    assert local_remote_path(str(tmp_path)) == tmp_path
    assert local_remote_path(f"file://{tmp_path}") == tmp_path
    assert local_remote_path(f"file://localhost{tmp_path}") == tmp_path
    for url in (
        "relative/path",
        "ssh://host/x.git",
        "git@host:x.git",
        "https://h/x.git",
        f"file://otherhost{tmp_path}",
        str(tmp_path / "missing"),
        "",
        None,
    ):
        assert local_remote_path(url) is None
    assert open_local_remote(str(tmp_path)) is None  # a directory that is no repository


def loose_objects(repo: Path) -> set[str]:
    objects = repo / "objects"
    return {d.name + f.name for d in objects.glob("[0-9a-f][0-9a-f]") for f in d.iterdir()}


def recorded(repo: Path) -> list[str]:
    return (repo / "objects" / "info" / "thrum-packs").read_text().split()


def test_each_sync_step_writes_its_new_objects_as_one_pack_not_a_file_each(cluster):
    """Creating files is what a busy filesystem does slowly: the commit, the push and the
    fetch of a sync each add one pack (and its index) to the store they write, whatever
    the number of objects, and record it for consolidation."""
    a, b = cluster.a, cluster.b
    stores = {"a": a.repo / ".git", "remote": cluster.remote, "b": b.repo / ".git"}
    before = {k: (packs(v), loose_objects(v)) for k, v in stores.items()}
    append(a.worktree, SHARD, event("01A"), event("01B"))
    append(a.worktree, "messages/bob/000001.jsonl", event("01C"))
    assert a.sync().pushed
    report = b.sync()
    assert report.received == 3 and b.read(SHARD) == a.read(SHARD)
    for name, store in stores.items():
        new_packs = packs(store) - before[name][0]
        assert {Path(n).suffix for n in new_packs} == {".pack", ".idx"} and len(new_packs) == 2, name
        assert loose_objects(store) == before[name][1], name  # no object written loose
        assert Path(min(new_packs)).stem in recorded(store), name
    blob = remote_blob(cluster, SHARD)
    for repo in (a.repo, cluster.remote, b.repo):
        assert pygit2.Repository(str(repo))[blob.id].data == a.read(SHARD)
    assert b.replicator.index.flush() and b.replicator.repo.status() == {}
    assert_linear_single_root(cluster.remote)


def test_fetch_through_a_file_url_and_the_tracking_ref(cluster):
    a, b = cluster.a, cluster.b
    pygit2.Repository(str(b.repo)).remotes.set_url("origin", f"file://{cluster.remote}")
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    assert b.sync().received == 1
    tip = pygit2.Repository(str(cluster.remote)).references[SYNC_REF].target
    assert b.replicator.repo.references["refs/remotes/origin/a-sync"].target == tip


def test_fetch_refuses_a_corrupt_loose_object_and_keeps_it_out(cluster):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    blob = remote_blob(cluster, SHARD)
    path = loose_path(cluster.remote, blob.id)  # whoever can write the remote forges a loose copy
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(zlib.compress(b"blob 6\0forged", 1))
    before = packs(b.repo / ".git")
    with pytest.raises(SyncError, match="corrupt"):
        b.sync()
    assert not b.replicator.repo.odb.exists(blob.id)
    assert packs(b.repo / ".git") == before  # nothing of that fetch was written
    assert b.read(SHARD) == b""


def test_fetch_from_a_remote_whose_objects_are_packed(tmp_path, cluster):
    a, b = cluster.a, cluster.b
    # A pushes through libgit2's own transport (not thrum's direct copy): packs.
    repo_a = pygit2.Repository(str(a.repo))
    before = packs(cluster.remote)
    append(a.worktree, SHARD, event("01A"), event("01B"))
    a.commit()
    repo_a.remotes.create_anonymous(str(cluster.remote)).push([f"{SYNC_REF}:{SYNC_REF}"])
    assert packs(cluster.remote) != before
    assert not loose_path(cluster.remote, remote_blob(cluster, SHARD).id).exists()
    report = b.sync()  # direct copy falls back to libgit2's object database for packed objects
    assert report.received == 2 and b.read(SHARD) == a.read(SHARD)
    assert b.replicator.index.flush() and b.replicator.repo.status() == {}


def test_push_loses_a_race_when_the_remote_moved_since_the_fetch(cluster):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    append(b.worktree, "messages/bob/000001.jsonl", event("01B"))
    for r in (a, b):
        r.commit()
        r.replicator.merge(r.replicator.fetch(), r.files)
    assert a.replicator.push() is True
    assert b.replicator.push() is False
    tip = pygit2.Repository(str(cluster.remote)).references[SYNC_REF].target
    assert tip == a.replicator.repo.references[SYNC_REF].target
    assert b.sync().pushed and a.sync().received == 1
    assert_linear_single_root(cluster.remote)


def test_fast_path_in_a_replica_matches_the_merge_and_keeps_its_summary(cluster):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, *(event(f"01A{i:04d}") for i in range(200)))
    a.sync()
    b.sync()  # cold: B summarises the shard once
    b.files.take_received()
    assert SHARD in b.replicator._keys._items
    for round_ in range(3):
        before = b.read(SHARD)
        append(a.worktree, SHARD, event(f"01R{round_}"))
        a.sync()
        append(b.worktree, "messages/bob/000001.jsonl", event(f"01B{round_}"))  # another shard of B's
        b.sync()
        assert b.files.take_received()[SHARD] == [event(f"01R{round_}")]
        assert b.read(SHARD) == merge_shard(remote_blob(cluster, SHARD).data, before).data
    a.sync()
    assert a.read(SHARD) == b.read(SHARD) and a.read("messages/bob/000001.jsonl") == b.read("messages/bob/000001.jsonl")
    assert b.replicator.index.flush() and a.replicator.index.flush()
    assert b.replicator.repo.status() == {} and a.replicator.repo.status() == {}


def test_summary_of_a_shard_rewritten_in_place_is_not_trusted(cluster):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"), event("01B"))
    a.sync()
    b.sync()  # B keeps a summary of [A, B]: clean
    b.files.take_received()
    # Someone rewrites B's file in place (same length): [A, A], a repeated key ...
    path = b.worktree / SHARD
    forged = path.read_bytes().replace(b"01B", b"01A")
    with open(path, "r+b") as f:
        f.write(forged)
    # ... and a hostile remote holds [A, A, C], of which B's file is now a prefix.
    push_tree(cluster.remote, {SHARD: forged + event("01C")})
    b.sync()
    # The summary of [A, B] no longer matches the file, so the repeated key is seen.
    assert b.read(SHARD) == merge_shard(forged + event("01C"), forged).data == event("01A") + event("01C")
    assert b.files.take_received()[SHARD] == [event("01C")]


def test_both_sides_appended_to_one_shard_take_the_exact_merge(cluster):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    b.sync()
    append(a.worktree, SHARD, event("01A2"))
    append(b.worktree, SHARD, event("01B2"), event("01A"))  # a duplicate of a known event too
    a.sync()
    report = b.sync()
    assert report.received == 1 and report.sent == 1
    a.sync()
    assert a.read(SHARD) == b.read(SHARD) == event("01A") + event("01A2") + event("01B2")


def test_a_big_fetch_is_written_as_several_packs_each_complete(cluster, monkeypatch):
    """Memory stays bounded on a big fetch: the objects are written as a pack whenever
    enough wait, children before parents, so every pack's objects have their history."""
    import thrum.sync.gitstore.objbatch as objbatch

    a, b = cluster.a, cluster.b
    for i in range(6):
        append(a.worktree, f"messages/agent{i}/000001.jsonl", *(event(f"01A{i}{k:02d}") for k in range(40)))
        a.sync()
    monkeypatch.setattr(objbatch, "MAX_BUFFERED", 4096)
    before = packs(b.repo / ".git")
    assert b.sync().received == 240
    assert len(packs(b.repo / ".git") - before) >= 6
    for i in range(6):
        path = f"messages/agent{i}/000001.jsonl"
        assert b.read(path) == a.read(path)
    git_fsck(b.repo)


def test_merge_writes_index_entries_without_hashing_the_files(cluster, monkeypatch):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, *(event(f"01A{i}") for i in range(50)))
    a.sync()
    added = []
    real_add = pygit2.Index.add
    monkeypatch.setattr(pygit2.Index, "add", lambda self, x: (added.append(x), real_add(self, x))[1])
    b.sync()
    assert b.replicator.index.flush()  # written in batches (`gitlib.IndexStats`)
    assert not any(isinstance(x, (str, os.PathLike)) for x in added)  # no add-by-path (hashing)
    monkeypatch.undo()
    assert b.replicator.repo.status() == {}
    assert b.commit() is False
    append(b.worktree, SHARD, event("01B"))  # an append after the merge is still seen
    assert b.replicator.repo.status() == {SHARD: pygit2.enums.FileStatus.WT_MODIFIED}
    assert b.commit() is True


def test_a_fresh_replicator_rereads_what_a_fetch_did_not_keep(cluster, monkeypatch):
    import thrum.sync.replicate as replicate

    a, b = cluster.a, cluster.b
    monkeypatch.setattr(replicate, "KEEP_FETCHED_BYTES", 0)
    append(a.worktree, SHARD, event("01A"))
    append(a.worktree, "messages/bob/000001.jsonl", event("01B"))
    a.sync()
    fresh = Replicator(b.worktree)
    report = run_cycle(fresh, PlainLog(b.worktree))
    assert report.received == 2
    assert b.read(SHARD) == a.read(SHARD)

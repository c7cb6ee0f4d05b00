"""Direct object copying with a remote on a local filesystem, the merge's fast path in a
real replica (key summaries kept between cycles), and index entries written without hashing."""

from __future__ import annotations

import contextlib
import os
import zlib
from pathlib import Path

import pygit2
import pytest

from sync_helpers import append, assert_linear_single_root, event, push_tree
from thrum.sync import SyncError
from thrum.sync.localremote import local_remote_path, open_local_remote
from thrum.sync.merge import merge_shard
from thrum.sync.replicate import Replicator, run_cycle
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


def test_push_and_fetch_copy_loose_objects_without_building_packs(cluster):
    a, b = cluster.a, cluster.b
    before = packs(cluster.remote)
    append(a.worktree, SHARD, event("01A"), event("01B"))
    assert a.sync().pushed
    assert packs(cluster.remote) == before
    blob = remote_blob(cluster, SHARD)
    assert loose_path(cluster.remote, blob.id).is_file()
    report = b.sync()
    assert report.received == 2 and b.read(SHARD) == a.read(SHARD)
    assert loose_path(b.repo / ".git", blob.id).is_file()  # copied as the remote's loose file
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
    path = loose_path(cluster.remote, blob.id)
    os.chmod(path, 0o644)
    path.write_bytes(zlib.compress(b"blob 6\0forged", 1))
    with pytest.raises(SyncError, match="corrupt"):
        b.sync()
    assert not b.replicator.repo.odb.exists(blob.id)
    assert b.read(SHARD) == b""


def test_fetch_from_a_remote_whose_objects_are_packed(tmp_path, cluster):
    a, b = cluster.a, cluster.b
    # A pushes through libgit2's own transport (not thrum's direct copy): packs.
    repo_a = pygit2.Repository(str(a.repo))
    before = packs(cluster.remote)
    append(a.worktree, SHARD, event("01A"), event("01B"))
    a.replicator.commit_pending()
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
        r.replicator.commit_pending()
        r.replicator.merge(r.replicator.fetch())
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
    assert SHARD in b.replicator._keys._items
    for round_ in range(3):
        before = b.read(SHARD)
        append(a.worktree, SHARD, event(f"01R{round_}"))
        a.sync()
        append(b.worktree, "messages/bob/000001.jsonl", event(f"01B{round_}"))  # another shard of B's
        report = b.sync()
        assert report.received_lines[SHARD] == [event(f"01R{round_}")]
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
    # Someone rewrites B's file in place (same length): [A, A], a repeated key ...
    path = b.worktree / SHARD
    forged = path.read_bytes().replace(b"01B", b"01A")
    with open(path, "r+b") as f:
        f.write(forged)
    # ... and a hostile remote holds [A, A, C], of which B's file is now a prefix.
    push_tree(cluster.remote, {SHARD: forged + event("01C")})
    report = b.sync()
    # The summary of [A, B] no longer matches the file, so the repeated key is seen.
    assert b.read(SHARD) == merge_shard(forged + event("01C"), forged).data == event("01A") + event("01C")
    assert report.received_lines[SHARD] == [event("01C")]


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


def test_a_push_links_our_objects_into_the_remote_and_a_fetch_copies_theirs(cluster):
    """Creating files is most of a push's cost: our own loose objects are hard-linked into
    a remote on the same filesystem. A fetch never links: the remote's owner could change
    a shared file after it was verified."""
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"), event("01B"))
    assert a.sync().pushed
    blob = remote_blob(cluster, SHARD)
    ours, remote = loose_path(a.repo / ".git", blob.id), loose_path(cluster.remote, blob.id)
    assert ours.is_file() and remote.is_file()
    assert ours.stat().st_ino == remote.stat().st_ino  # one file, two names
    assert b.sync().received == 2
    theirs = loose_path(b.repo / ".git", blob.id)
    assert theirs.is_file() and theirs.stat().st_ino != remote.stat().st_ino
    assert b.read(SHARD) == a.read(SHARD)
    # The remote's consolidation deleting its name for the object leaves ours whole.
    remote.unlink()
    assert ours.is_file() and pygit2.Repository(str(a.repo))[blob.id].data == a.read(SHARD)


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
    assert b.replicator.commit_pending() is False
    append(b.worktree, SHARD, event("01B"))  # an append after the merge is still seen
    assert b.replicator.repo.status() == {SHARD: pygit2.enums.FileStatus.WT_MODIFIED}
    assert b.replicator.commit_pending() is True


def test_a_fresh_replicator_rereads_what_a_fetch_did_not_keep(cluster, monkeypatch):
    import thrum.sync.replicate as replicate

    a, b = cluster.a, cluster.b
    monkeypatch.setattr(replicate, "KEEP_FETCHED_BYTES", 0)
    append(a.worktree, SHARD, event("01A"))
    append(a.worktree, "messages/bob/000001.jsonl", event("01B"))
    a.sync()
    fresh = Replicator(b.worktree)
    report = run_cycle(fresh, contextlib.nullcontext)
    assert report.received == 2
    assert b.read(SHARD) == a.read(SHARD)

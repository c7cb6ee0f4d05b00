"""A remote that is a repository on this machine, through libgit2's own transport: what
each sync step writes, races, what whoever can write that repository can plant (each
refused with one clear line, never followed, never waited on); and the merge's fast
path in a real replica (key summaries kept between cycles; its decisions on the git
store's fake: test_sync_replicate.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import zlib
from pathlib import Path

import pygit2
import pytest

from sync_helpers import append, assert_linear_single_root, event, git_fsck, keys_of, push_tree
from thrum.sync import SyncError
from thrum.sync.merge.shard import merge_shard
from thrum.sync.transport.callbacks import SyncCallbacks
from thrum.sync.transport.credentials import credentials_from_env
from thrum.sync.transport.pathremote import LooseObjectLooks, inspect_path_remote
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


def loose_objects(repo: Path) -> set[str]:
    objects = repo / "objects"
    return {d.name + f.name for d in objects.glob("[0-9a-f][0-9a-f]") for f in d.iterdir()}


def test_each_sync_step_writes_its_new_objects_as_one_pack_not_a_file_each(cluster):
    """Creating files is what a busy filesystem does slowly: the commit, the push and the
    fetch of a sync each add one pack (and its index) to the store they write, whatever
    the number of objects (libgit2's transport writes the remote's and the receiver's)."""
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
    blob = remote_blob(cluster, SHARD)
    for repo in (a.repo, cluster.remote, b.repo):
        assert pygit2.Repository(str(repo))[blob.id].data == a.read(SHARD)
    assert b.replicator.index.flush() and b.replicator.store.repo.status() == {}
    assert_linear_single_root(cluster.remote)


def test_fetch_through_a_file_url_and_the_tracking_ref(cluster):
    a, b = cluster.a, cluster.b
    pygit2.Repository(str(b.repo)).remotes.set_url("origin", f"file://{cluster.remote}")
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    assert b.sync().received == 1
    tip = pygit2.Repository(str(cluster.remote)).references[SYNC_REF].target
    assert b.replicator.store.repo.references["refs/remotes/origin/a-sync"].target == tip


def test_fetch_refuses_a_forged_loose_object_and_keeps_it_out(cluster, fsck_expect):
    """Whoever can write the remote forges a loose object: content that does not hash to
    its name, under a tip of theirs. libgit2 checks every object it copies."""
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    honest = event("01B")
    forged_id = pygit2.hash(honest)
    path = loose_path(cluster.remote, forged_id)
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(zlib.compress(b"blob %d\0" % len(honest) + b"x" * len(honest), 1))
    push_tree(cluster.remote, {SHARD: (forged_id, pygit2.enums.FileMode.BLOB)})
    fsck_expect("hash-path mismatch", cluster.remote)  # the remote holds the forgery, we do not
    fsck_expect(f"missing blob {forged_id}", cluster.remote)
    before = packs(b.repo / ".git")
    with pytest.raises(SyncError) as refused:
        b.sync()
    assert "remote origin" in str(refused.value) and "\n" not in str(refused.value)
    assert not b.replicator.store.repo.odb.exists(forged_id)
    assert packs(b.repo / ".git") == before  # nothing of that fetch was written
    assert b.read(SHARD) == b""
    git_fsck(b.repo)


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
    assert b.replicator.index.flush() and b.replicator.store.repo.status() == {}


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
    assert tip == a.replicator.store.repo.references[SYNC_REF].target
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
    assert b.replicator.store.repo.status() == {} and a.replicator.store.repo.status() == {}


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
    assert b.replicator.store.repo.status() == {}
    assert b.commit() is False
    append(b.worktree, SHARD, event("01B"))  # an append after the merge is still seen
    assert b.replicator.store.repo.status() == {SHARD: pygit2.enums.FileStatus.WT_MODIFIED}
    assert b.commit() is True


# --- what whoever can write the remote's directory can plant --------------------------------


def _plant(remote: Path, what: str, tmp_path: Path) -> None:
    """Plant ``what`` in the remote with plain file operations, as a co-writer could."""
    objects = remote / "objects"
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    if what == "fifo loose object":
        (objects / "ab").mkdir(exist_ok=True)
        os.mkfifo(objects / "ab" / ("c" * 38))
    elif what == "linked loose object":
        (objects / "ab").mkdir(exist_ok=True)
        (objects / "ab" / ("d" * 38)).symlink_to(outside / "whatever")
    elif what == "linked fan-out directory":
        (objects / "cd").symlink_to(outside)
    elif what == "fifo in the pack directory":
        os.mkfifo(objects / "pack" / "pack-0000.idx")
    elif what == "linked pack directory":
        shutil.move(objects / "pack", outside / "pack")
        (objects / "pack").symlink_to(outside / "pack")
    elif what == "alternates":
        (objects / "info").mkdir(exist_ok=True)
        (objects / "info" / "alternates").write_text(f"{outside}\n")
    elif what == "commondir":
        (remote / "commondir").write_text(f"{outside}\n")
    elif what == "linked a-sync ref":
        ref = remote / "refs" / "heads" / "a-sync"
        target = outside / "victim-ref"
        target.write_text(ref.read_text() if ref.exists() else "")
        ref.unlink(missing_ok=True)
        ref.symlink_to(target)
    elif what == "linked refs directory":
        shutil.move(remote / "refs", outside / "refs")
        (remote / "refs").symlink_to(outside / "refs")
    elif what == "fifo config":
        (remote / "config").rename(outside / "config")
        os.mkfifo(remote / "config")
    elif what in ("config including a FIFO", "config including if", "huge config"):
        shutil.copy(remote / "config", outside / "honest-config")
    if what in ("config including a FIFO", "config including if"):
        os.mkfifo(outside / "fifo")
        section = "[include]" if what == "config including a FIFO" else '[includeIf "gitdir:/"]'
        with open(remote / "config", "a") as f:
            f.write(f"{section}\n\tpath = {outside / 'fifo'}\n")
    elif what == "huge config":
        with open(remote / "config", "a") as f:
            f.write("# padding\n" * 200_000)


def _repair(remote: Path, what: str, tmp_path: Path) -> None:
    """What the team does once it noticed: the planted file goes, the remote is itself again."""
    objects, outside = remote / "objects", tmp_path / "outside"
    if what in ("fifo loose object", "linked loose object"):
        for name in ("c" * 38, "d" * 38):
            (objects / "ab" / name).unlink(missing_ok=True)
    elif what == "linked fan-out directory":
        (objects / "cd").unlink()
    elif what == "fifo in the pack directory":
        (objects / "pack" / "pack-0000.idx").unlink()
    elif what in ("linked pack directory", "linked refs directory"):
        rel = "objects/pack" if what == "linked pack directory" else "refs"
        (remote / rel).unlink()
        shutil.move(outside / Path(rel).name, remote / rel)
    elif what == "alternates":
        (objects / "info" / "alternates").unlink()
    elif what == "commondir":
        (remote / "commondir").unlink()
    elif what == "linked a-sync ref":
        ref = remote / "refs" / "heads" / "a-sync"
        tip = (outside / "victim-ref").read_text()
        ref.unlink()
        ref.write_text(tip)
    elif what == "fifo config":
        (remote / "config").unlink()
        (outside / "config").rename(remote / "config")
    elif what in ("config including a FIFO", "config including if", "huge config"):
        shutil.copy(outside / "honest-config", remote / "config")


PLANTED = [
    ("fifo loose object", "a FIFO"),
    ("linked loose object", "a symbolic link"),
    ("linked fan-out directory", "a symbolic link"),
    ("fifo in the pack directory", "a FIFO"),
    ("linked pack directory", "a symbolic link"),
    ("alternates", "points to another repository"),
    ("commondir", "points to another repository"),
    ("linked a-sync ref", "a symbolic link"),
    ("linked refs directory", "a symbolic link"),
    ("fifo config", "a FIFO"),
    ("config including a FIFO", "includes other files"),
    ("config including if", "includes other files"),
    ("huge config", "larger than 1 MiB"),
]


@pytest.mark.parametrize("what,says", PLANTED, ids=[p[0] for p in PLANTED])
def test_what_a_co_writer_plants_is_refused_before_libgit2_opens_anything(cluster, tmp_path, what, says):
    """Each is refused in one line naming the remote and what was found; nothing is read
    through it, nothing written through it, no sync waits on it; our appends are committed."""
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    _plant(cluster.remote, what, tmp_path)
    packs_outside = set((tmp_path / "outside").rglob("*.pack"))
    append(b.worktree, "messages/bob/000001.jsonl", event("01B"))
    for replica in (a, b):
        with pytest.raises(SyncError) as refused:
            within(30, replica.sync)
        message = str(refused.value)
        assert message.startswith("remote origin (") and says in message and "\n" not in message, message
    assert b.replicator.last_commit is not None  # local work went on: B's append is committed
    assert set((tmp_path / "outside").rglob("*.pack")) == packs_outside  # no push wrote through a link
    victim = tmp_path / "outside" / "victim-ref"
    if victim.exists():
        assert victim.read_text().strip() == str(remote_tip_of(cluster))
    _repair(cluster.remote, what, tmp_path)
    assert within(30, b.sync).pushed and within(30, a.sync).received == 1  # and syncing resumes


def remote_tip_of(cluster) -> pygit2.Oid:
    return pygit2.Repository(str(cluster.a.repo)).references["refs/remotes/origin/a-sync"].target


def within(seconds: float, fn):
    """``fn()``'s result or exception, failing the test if it has not returned in time."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            out["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still waiting after {seconds} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_a_remote_another_user_owns_is_refused_unless_trusted(cluster):
    """As git's safe.directory: a repository another user owns is not used, unless the user
    names it in "trusted_remote_paths" (then libgit2's own ownership check is lifted for it)."""
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    for path in [cluster.remote, *cluster.remote.rglob("*")]:
        os.lchown(path, 54321, 54321)
    with pytest.raises(SyncError) as refused:
        b.sync()
    message = str(refused.value)
    assert "belongs to uid 54321, not to you" in message and '"trusted_remote_paths"' in message
    assert "\n" not in message
    b.replicator.credentials = credentials_from_env({"trusted_remote_paths": [str(cluster.remote)]})
    assert b.sync().received == 1 and b.read(SHARD) == a.read(SHARD)
    append(b.worktree, SHARD, event("01B"))
    assert b.sync().pushed
    with pytest.raises(SyncError, match="not to you"):  # trusted by B, not by A
        a.sync()
    a.replicator.credentials = credentials_from_env({"trusted_remote_paths": ["*"]})
    assert a.sync().received == 1
    git_fsck(b.repo)


def test_a_push_another_pusher_overwrote_is_retried_not_lost(cluster, monkeypatch):
    """libgit2's local transport checks a push is a fast-forward of the tip it saw, then
    moves the ref without comparing again: a racing pusher can overwrite it. The ref is
    read back; a push that did not land is a lost race and the cycle merges again."""
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    b.sync()
    append(b.worktree, "messages/bob/000001.jsonl", event("01B"))
    append(a.worktree, SHARD, event("01A2"))
    a.commit()
    a.replicator.merge(a.replicator.fetch(), a.files)  # A is ready to push on the same tip as B
    real_update = SyncCallbacks.push_update_reference
    raced = []

    def overwritten(self, refname, message):  # right after B's ref update: A's push lands over it
        real_update(self, refname, message)
        if not raced:
            raced.append(refname)
            subprocess.run(  # what A's libgit2 does once its fast-forward check passed: write, force the ref
                [
                    "git",
                    "--git-dir",
                    str(a.repo / ".git"),
                    "push",
                    "-q",
                    "--force",
                    str(cluster.remote),
                    "a-sync:a-sync",
                ],
                check=True,
            )

    monkeypatch.setattr(SyncCallbacks, "push_update_reference", overwritten)
    report = b.sync()
    assert raced and report.pushed and report.attempts == 2
    monkeypatch.undo()
    a.sync()
    for path in (SHARD, "messages/bob/000001.jsonl"):
        assert a.read(path) == b.read(path) != b""
    assert keys_of(a.read(SHARD)) == [b"01A", b"01A2"]
    assert_linear_single_root(cluster.remote)
    git_fsck(cluster.remote)


def _loose_blobs(remote: Path, n: int) -> list[str]:
    """Loose objects in the remote, as git's receive-pack leaves a small push (real git)."""
    data = "".join(f"loose {i}\n\0" for i in range(n))
    out = subprocess.run(
        ["git", "--git-dir", str(remote), "hash-object", "-w", "--stdin-paths"],
        input="".join(f"{p}\n" for p in _write_each(remote.parent / "blobs", data.split("\0")[:-1])),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def _write_each(where: Path, contents: list[str]) -> list[Path]:
    where.mkdir(exist_ok=True)
    paths = [where / f"{i}.txt" for i in range(len(contents))]
    for path, text in zip(paths, contents):
        path.write_text(text)
    return paths


def test_a_fan_out_directory_found_clean_is_looked_at_again_once_anything_in_it_changes(cluster, tmp_path):
    """The look keeps the fan-out directories it found clean (a remote git pushes to holds
    thousands of loose objects between its repacks) by their change time, which the kernel
    sets at every entry added, removed or renamed: whatever is planted in a kept directory,
    or beside them, is refused as at the first look."""
    remote = cluster.remote
    ids = _loose_blobs(remote, 40)
    looks = LooseObjectLooks(clock=lambda: time.time() + 60)  # every directory counts as settled
    look = lambda: within(30, lambda: inspect_path_remote(str(remote), where="remote origin", looks=looks))  # noqa: E731
    assert look().git_dir == remote.resolve()
    kept = remote / "objects" / ids[0][:2]
    assert (kept / ids[0][2:]).is_file()
    plants = {
        "a FIFO": lambda: os.mkfifo(kept / ("e" * 38)),
        "a symbolic link": lambda: (kept / ("f" * 38)).symlink_to(tmp_path / "elsewhere"),
    }
    for says, plant in plants.items():
        plant()
        with pytest.raises(SyncError, match=f"objects/{kept.name}/.* is {says}"):
            look()
        for name in ("e" * 38, "f" * 38):
            (kept / name).unlink(missing_ok=True)
        assert look().git_dir == remote.resolve()  # the directory is itself again
    fresh = remote / "objects" / "fe"
    fresh.mkdir(exist_ok=fresh.exists())
    os.mkfifo(fresh / ("0" * 38))  # a new fan-out directory
    with pytest.raises(SyncError, match="objects/fe/0+ is a FIFO"):
        look()
    (fresh / ("0" * 38)).unlink()
    look()
    shutil.move(kept, tmp_path / "moved")
    kept.symlink_to(tmp_path / "moved")  # a kept directory replaced by a link to its copy
    with pytest.raises(SyncError, match=f"objects/{kept.name} is a symbolic link"):
        look()
    kept.unlink()
    shutil.move(tmp_path / "moved", kept)
    assert look().git_dir == remote.resolve()
    assert cluster.b.sync().pushed  # and the remote, with its loose objects, syncs

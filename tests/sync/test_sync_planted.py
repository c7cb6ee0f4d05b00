"""What a pusher can plant in a remote on a shared filesystem: links, FIFOs, oversized
and forged objects. Each is refused with a clear error, never followed, and never makes
a sync wait forever (a waiting sync holds its lock for good)."""

from __future__ import annotations

import os
import threading
import zlib

import pytest

from sync_helpers import append, event
from thrum.sync import SyncError, hygiene, remotefiles
from thrum.sync.gitstore import packs
from thrum.sync.localremote import open_local_remote

from test_sync_localremote import SHARD, loose_path, remote_blob


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


@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_fetch_never_follows_a_link_or_waits_on_a_fifo_planted_as_a_loose_object(cluster, tmp_path, planted):
    """Whoever can push to a shared remote can put anything at a loose object's path: a
    link to a file of ours (to make us read it) or a FIFO (to make the sync wait forever)."""
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    blob = remote_blob(cluster, SHARD)
    path = loose_path(cluster.remote, blob.id)
    path.parent.mkdir(exist_ok=True)
    if planted == "link":
        secret = tmp_path / "secret"
        secret.write_bytes(zlib.compress(b"blob 6\0secret", 1))
        path.symlink_to(secret)
    else:
        os.mkfifo(path)
    with pytest.raises(SyncError, match="not a regular file"):
        b.sync()
    assert not b.replicator.repo.odb.exists(blob.id)


@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_what_is_planted_at_the_remotes_pack_record_is_never_written_through(cluster, tmp_path, planted):
    """The push still lands; its pack is only not recorded for consolidation."""
    a, b = cluster.a, cluster.b
    mine = tmp_path / "mine.txt"
    mine.write_text("mine\n")
    record = cluster.remote / "objects" / "info" / "thrum-packs"
    record.parent.mkdir(exist_ok=True)
    record.unlink(missing_ok=True)
    if planted == "link":
        record.symlink_to(mine)
    else:
        os.mkfifo(record)
    append(a.worktree, SHARD, event("01A"))
    assert within(10, a.sync).pushed
    assert within(10, b.sync).received == 1 and b.read(SHARD) == a.read(SHARD)
    assert mine.read_text() == "mine\n"


@pytest.mark.parametrize("where", ["config", "refs/heads/a-sync", "objects/pack/pack-x.idx"])
def test_a_fifo_where_libgit2_would_open_a_file_is_refused_at_once(cluster, where):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    path = cluster.remote / where
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    with pytest.raises(SyncError, match="not a regular file"):
        within(10, b.sync)
    with pytest.raises(SyncError, match="not a regular file"):
        within(10, lambda: open_local_remote(str(cluster.remote)))


def test_a_fifo_planted_as_a_loose_commit_is_refused(cluster):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    tip = open_local_remote(str(cluster.remote)).tip("refs/heads/a-sync")
    path = loose_path(cluster.remote, tip)
    path.parent.mkdir(exist_ok=True)
    os.mkfifo(path)
    with pytest.raises(SyncError, match="not a regular file"):
        within(10, b.sync)


def test_an_object_too_large_to_copy_is_refused_before_it_is_inflated(cluster, monkeypatch):
    """A zlib bomb: a few KB on disk, far more inflated. The fetch stops at the bound."""
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    blob = remote_blob(cluster, SHARD)
    monkeypatch.setattr(remotefiles, "MAX_OBJECT_BYTES", 64 * 1024)
    body = b"x" * (8 * 2**20)
    path = loose_path(cluster.remote, blob.id)
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(zlib.compress(b"blob %d\0" % len(body) + body, 9))  # ~8 KB on disk
    assert path.stat().st_size < 64 * 1024
    with pytest.raises(SyncError, match="larger than"):
        b.sync()
    assert not b.replicator.repo.odb.exists(blob.id)


def test_a_pack_whose_index_was_never_placed_is_not_left_behind(tmp_path, monkeypatch):
    objects = tmp_path / "objects"
    objects.mkdir()

    def fail(src, dst):
        if str(dst).endswith(".idx"):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    real = os.replace
    monkeypatch.setattr(packs.os, "replace", fail)
    with pytest.raises(OSError):
        packs.write_plain_pack(objects, [(b"\x01" * 20, packs.BLOB, b"data\n")])
    assert list((objects / "pack").iterdir()) == []


def test_a_fifo_in_a_shared_remote_makes_consolidation_skip_it_not_wait(cluster):
    os.mkfifo(cluster.remote / "packed-refs")
    assert within(10, lambda: hygiene.has_work(cluster.remote)) is False
    report = within(10, lambda: hygiene.consolidate(cluster.remote))
    assert "not a regular file" in (report.skipped or "")

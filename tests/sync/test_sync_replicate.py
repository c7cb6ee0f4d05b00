"""Replication: commit, fetch, merge, push.

Through a bare remote with real clones where git matters (the index, packs, roots,
unreachable remotes, hostile trees); in memory (`memory_cluster`: the git store's fake,
proven by test_gitstore_conformance.py) where only the cycle's logic is under test.
"""

from __future__ import annotations

import contextlib
import subprocess
import time

import pygit2
import pytest

from fixtures.repos.builders import AUTHOR, make_repo
from sync_helpers import (
    Cluster,
    append,
    assert_linear_single_root,
    committed,
    committed_names,
    event,
    history,
    keys_of,
    make_cluster,
    push_files,
    push_tree,
    tree_with,
)
from thrum.sync import RemoteUnreachable, SyncError
from thrum.sync.cycle import run_cycle
from thrum.sync.gitstore.api import Oid, Signature
from thrum.sync.logaccess import PlainLog
from thrum.sync.merge.shard import merge_shard
from thrum.sync.replicate import Replicator
from thrum.sync.worktree import SYNC_REF, ensure_sync_worktree

SHARD = "messages/alice/000001.jsonl"
SIG = Signature("other", "other@example.invalid", 1700000000, 0)


def remote_tip(cluster: Cluster) -> Oid | None:
    return cluster.remote_tip()


def head(replica) -> Oid | None:
    return replica.head()


def test_replicate_a_appends_b_receives(cluster):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"), event("01B"))
    report = a.sync()
    assert report.pushed and report.commits == 1 and report.sent == 2 and report.received == 0
    report = b.sync()
    assert report.received == 2
    assert b.files.take_received() == {SHARD: [event("01A"), event("01B")]}
    assert b.read(SHARD) == a.read(SHARD)
    assert head(a) == head(b) == remote_tip(cluster)
    assert b.replicator.index.flush()  # the index's stat data is written in batches (and at the end)
    assert b.replicator.store.repo.status() == {}  # the worktree index matches the merged files


def test_the_worktree_index_is_written_in_batches_not_at_every_sync(cluster):
    """Writing the index rewrites every entry (its cost grows with the history's files): a
    sync records stat data, written at most every FLUSH_S seconds and at the end."""
    a, b = cluster.a, cluster.b
    index = a.replicator.common_dir / "worktrees" / "a-sync" / "index"
    for i in range(5):
        append(a.worktree, f"messages/agent{i}/000001.jsonl", event(f"01X{i}", f"agent{i}"))
        a.sync()
    before = index.stat().st_mtime_ns if index.exists() else None
    for i in range(5):
        append(a.worktree, SHARD, event(f"01Y{i}"))
        a.sync()
    assert (index.stat().st_mtime_ns if index.exists() else None) == before
    assert len(a.replicator.index.pending) >= 6
    # A sync without the daemon's record of appended files asks git: nothing is lost meanwhile.
    append(a.worktree, SHARD, event("01Z"))
    assert a.commit()
    a.sync()
    assert b.sync().received == 11
    assert a.replicator.index.flush() and a.replicator.index.pending == {}
    assert index.stat().st_mtime_ns != before
    assert a.replicator.store.repo.status() == {}
    a.replicator.index.FLUSH_S = 0.0  # and past FLUSH_S, the next sync writes it
    append(a.worktree, SHARD, event("01Z2"))
    a.sync()
    assert a.replicator.index.pending == {} and a.replicator.store.repo.status() == {}


def test_replicate_concurrent_appends_same_shard_converge(memory_cluster3):
    a, b, c = memory_cluster3.replicas
    append(a.worktree, SHARD, event("01A1"))
    a.sync()
    for r in (b, c):
        r.sync()
    append(a.worktree, SHARD, event("01A2"), event("01A3"))
    append(b.worktree, SHARD, event("01B1"), b"torn garbage")
    append(c.worktree, SHARD, event("01C1"))
    append(c.worktree, "events/000001.jsonl", event("01C2"))
    for r in (a, b, c, a, b):
        r.sync()
    shards = {r.read(SHARD) for r in (a, b, c)}
    assert len(shards) == 1
    data = shards.pop()
    keys = keys_of(data)
    assert sorted(keys) == sorted([b"01A1", b"01A2", b"01A3", b"01B1", b"\xfftorn garbage", b"01C1"])
    assert len(keys) == len(set(keys))
    assert b"<<<<<<<" not in data and b">>>>>>>" not in data
    assert a.read("events/000001.jsonl") == b.read("events/000001.jsonl") == event("01C2")
    assert head(a) == head(b) == head(c) == remote_tip(memory_cluster3)
    for store in (memory_cluster3.remote, a.store, b.store, c.store):
        assert_linear_single_root(store)


def test_replicate_merge_takes_uncommitted_appends(memory_cluster):
    a, b = memory_cluster.a, memory_cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    append(b.worktree, SHARD, event("01B"))
    tip = b.replicator.fetch()  # no commit: 01B is only in the file
    outcome = b.replicator.merge(tip, b.files)
    assert outcome.commits == 1 and outcome.sent == 1 and outcome.received == 1
    assert b.read(SHARD) == event("01A") + event("01B")
    assert committed(b.store, SHARD) == event("01A") + event("01B")
    assert b.commit() is False  # what the merge wrote is what it committed


def test_replicate_push_race_is_retried_and_converges(memory_cluster):
    a, b = memory_cluster.a, memory_cluster.b
    append(a.worktree, SHARD, event("01A1"))
    append(b.worktree, "messages/bob/000001.jsonl", event("01B1"))
    # Both merge on the same (absent) remote tip; A pushes first.
    for r in (a, b):
        r.commit()
        r.replicator.merge(r.replicator.fetch(), r.files)
    assert a.replicator.push() is True
    assert b.replicator.push() is False
    report = b.sync()
    assert report.pushed and report.attempts == 1 and report.received == 1
    a.sync()
    for shard in (SHARD, "messages/bob/000001.jsonl"):
        assert a.read(shard) == b.read(shard) != b""
    assert_linear_single_root(memory_cluster.remote)


def test_run_cycle_retries_when_someone_pushes_during_the_cycle(memory_cluster):
    a, b = memory_cluster.a, memory_cluster.b
    append(b.worktree, SHARD, event("01B1"))
    pushes = iter(range(2))
    sleeps = []
    fetch = b.replicator.fetch

    def racing_fetch(credentials=None):
        # Each time B has fetched, A slips a push in before B pushes (twice).
        tip = fetch(credentials)
        if next(pushes, None) is not None:
            append(a.worktree, "messages/carol/000001.jsonl", event(f"01A{time.monotonic_ns()}"))
            assert a.sync().pushed
        return tip

    b.replicator.fetch = racing_fetch
    report = run_cycle(b.replicator, b.files, sleep=sleeps.append, backoff_s=0.01)
    assert report.pushed and report.attempts == 3
    # exponential backoff with jitter (0.5x to 1.5x), so replicas that lost together spread out
    assert len(sleeps) == 2 and 0.005 <= sleeps[0] <= 0.015 and 0.01 <= sleeps[1] <= 0.03
    a.sync()
    assert a.read("messages/carol/000001.jsonl") == b.read("messages/carol/000001.jsonl")
    assert len(keys_of(b.read("messages/carol/000001.jsonl"))) == 2
    assert head(a) == head(b) == remote_tip(memory_cluster)
    assert_linear_single_root(memory_cluster.remote)


def test_run_cycle_gives_up_after_max_attempts(memory_cluster):
    a, b = memory_cluster.a, memory_cluster.b
    append(b.worktree, SHARD, event("01B1"))

    class AlwaysRacing(PlainLog):
        def locked(self):
            append(a.worktree, "events/000001.jsonl", event(f"01A{time.monotonic_ns()}"))
            a.sync()
            return contextlib.nullcontext()

    report = run_cycle(b.replicator, AlwaysRacing(b.worktree), max_attempts=2, sleep=lambda s: None)
    assert not report.pushed and report.attempts == 2
    assert "rejected 2 times" in report.error
    assert b.sync().pushed  # nothing was lost: the next cycle lands it
    assert keys_of(a.read(SHARD)) == []
    a.sync()
    assert keys_of(a.read(SHARD)) == [b"01B1"]


def test_each_merged_chunk_is_handed_over_inside_the_lock(memory_cluster):
    a, b = memory_cluster.a, memory_cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    b.sync()
    assert b.files.held == [True]
    assert b.files.take_received() == {SHARD: [event("01A")]}


def test_replicate_unrelated_roots_remote_keeps_one_root(tmp_path):
    cluster = make_cluster(tmp_path, 1)
    a = cluster.a
    # B created its a-sync with some other tool: a different root, with events.
    b_repo = pygit2.clone_repository(str(cluster.remote), str(tmp_path / "b"))
    tree = tree_with(b_repo, None, {"messages/bob/000001.jsonl": event("01B1") + event("01S")})
    b_repo.create_commit(SYNC_REF, AUTHOR, AUTHOR, "other root\n", tree, [])
    b_wt = ensure_sync_worktree(tmp_path / "b")
    b = Replicator(b_wt)
    append(a.worktree, "messages/bob/000001.jsonl", event("01S"), event("01A1"))
    a.sync()
    report = run_cycle(b, PlainLog(b.worktree_path))
    assert report.pushed and report.received == 1 and report.sent == 1
    assert_linear_single_root(cluster.remote)
    roots = [c for c in history(cluster.remote) if not c.parents]
    assert roots[0].id == history(a.repo)[-1].id  # the remote's root won
    a.sync()
    assert a.read("messages/bob/000001.jsonl") == (b_wt / "messages/bob/000001.jsonl").read_bytes()
    assert keys_of(a.read("messages/bob/000001.jsonl")) == [b"01S", b"01A1", b"01B1"]


def test_replicate_both_offline_then_sync_share_one_root(tmp_path):
    cluster = make_cluster(tmp_path, 0)
    replicas = []
    for name in ("a", "b"):
        repo = make_repo(tmp_path / name)
        repo.remotes.create("origin", str(tmp_path / "nowhere.git"))  # offline at creation
        wt = ensure_sync_worktree(tmp_path / name)
        repo.remotes.set_url("origin", str(cluster.remote))
        append(wt, f"messages/{name}/000001.jsonl", event(f"01{name}"))
        replicas.append(Replicator(wt))
    for r in replicas + replicas:
        assert run_cycle(r, PlainLog(r.worktree_path)).pushed
    assert_linear_single_root(cluster.remote)
    for shard in ("messages/a/000001.jsonl", "messages/b/000001.jsonl"):
        assert (replicas[0].worktree_path / shard).read_bytes() == (replicas[1].worktree_path / shard).read_bytes()


@pytest.mark.parametrize("url", ["{tmp}/does-not-exist.git", "ssh://git@127.0.0.1:1/x.git", "file://{tmp}/nope.git"])
def test_run_cycle_unreachable_remote_fails_fast_after_local_commit(tmp_path, url):
    cluster = make_cluster(tmp_path, 1)
    a = cluster.a
    pygit2.Repository(str(a.repo)).remotes.set_url("origin", url.format(tmp=tmp_path))
    before = head(a)
    append(a.worktree, SHARD, event("01A"))
    with pytest.raises(RemoteUnreachable) as info:
        a.sync()
    message = str(info.value)
    assert "\n" not in message and "origin" in message and "unreachable" in message
    assert head(a) != before
    assert a.replicator.store.repo.revparse_single(f"{SYNC_REF}:{SHARD}").data == event("01A")


def test_run_cycle_noop_makes_no_commit_and_no_push(memory_cluster):
    a = memory_cluster.a
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    tip, local = remote_tip(memory_cluster), head(a)
    report = a.sync()
    assert (report.commits, report.sent, report.received, report.pushed) == (0, 0, 0, True)
    assert head(a) == local and remote_tip(memory_cluster) == tip


def test_run_cycle_without_remote_only_commits(tmp_path):
    make_repo(tmp_path / "solo")
    wt = ensure_sync_worktree(tmp_path / "solo")
    r = Replicator(wt)
    assert not r.has_remote()
    append(wt, SHARD, event("01A"))
    report = run_cycle(r, PlainLog(r.worktree_path))
    assert report.commits == 1 and report.remote is None and not report.pushed
    assert run_cycle(r, PlainLog(r.worktree_path)).commits == 0
    with pytest.raises(SyncError, match="no remote named origin"):
        r.fetch()


def test_has_remote_follows_remotes_added_and_removed_after_it_first_answered(tmp_path):
    # Addressing asks has_remote on every send, so its answer is kept; a remote added
    # (or removed) afterwards, by git or by pygit2, must still change it.
    make_repo(tmp_path / "solo")
    wt = ensure_sync_worktree(tmp_path / "solo")
    r = Replicator(wt)
    assert not r.has_remote() and not r.has_remote()
    pygit2.Repository(str(tmp_path / "solo")).remotes.create("origin", str(tmp_path / "remote.git"))
    assert r.has_remote()
    pygit2.Repository(str(tmp_path / "solo")).remotes.delete("origin")
    assert not r.has_remote()


def test_remote_url_follows_a_url_changed_after_it_first_answered(tmp_path):
    # A cycle asks for the URL several times, so the answer is kept; `git remote set-url`
    # (and pygit2's, as thrum's own commands do) must still change it for the next sync.
    make_repo(tmp_path / "solo")
    wt = ensure_sync_worktree(tmp_path / "solo")
    repo = pygit2.Repository(str(tmp_path / "solo"))
    repo.remotes.create("origin", str(tmp_path / "first.git"))
    r = Replicator(wt)
    assert r.remote_url() == str(tmp_path / "first.git") == r.remote_url()
    subprocess.run(["git", "-C", str(tmp_path / "solo"), "remote", "set-url", "origin", str(tmp_path / "second.git")])
    assert r.remote_url() == str(tmp_path / "second.git")
    subprocess.run(["git", "-C", str(tmp_path / "solo"), "remote", "set-url", "--push", "origin", "/x/push.git"])
    assert r.store.remote_url("origin", push=True) == "/x/push.git"
    assert r.store.remote_url("origin") == str(tmp_path / "second.git")
    repo.remotes.set_url("origin", str(tmp_path / "third.git"))
    assert r.remote_url() == str(tmp_path / "third.git")
    repo.remotes.delete("origin")
    assert r.remote_url() is None


def test_commit_pending_named_paths_and_idle(memory_cluster):
    a = memory_cluster.a
    r = a.replicator
    assert a.commit() is False
    append(a.worktree, SHARD, event("01A"))
    append(a.worktree, "messages/bob/000001.jsonl", event("01B"))
    (a.worktree / "notes.txt").write_text("not a shard\n")
    assert a.commit([SHARD]) is True
    assert committed_names(a.store, "messages") == ["alice"]
    assert a.commit([str(a.worktree / SHARD)]) is False
    assert a.commit() is True  # bob.jsonl, found by status
    assert a.commit() is False
    assert "notes.txt" not in committed_names(a.store)
    assert r.last_commit.paths == ["messages/bob/000001.jsonl"]


def test_a_commit_of_many_files_lists_fifty_and_counts_the_rest(memory_cluster):
    # the first commit of a large history touches thousands of files: its message stays small
    a = memory_cluster.a
    paths = [f"messages/agent{i:03d}/000001.jsonl" for i in range(60)]
    for i, path in enumerate(paths):
        append(a.worktree, path, event(f"01{i:03d}"))
    assert a.commit(paths) is True
    message = a.store.read(a.replicator.last_commit.commit)[1].decode().split("\n\n", 2)[2]
    assert message.splitlines() == [*paths[:50], "... and 10 more"]
    assert a.replicator.last_commit.paths == paths


def test_commit_pending_never_commits_a_deleted_shard(memory_cluster):
    a = memory_cluster.a
    append(a.worktree, SHARD, event("01A"))
    a.commit()
    (a.worktree / SHARD).unlink()
    assert a.commit() is False


def test_summary_of_a_shard_rewritten_in_place_is_not_trusted(memory_cluster):
    a, b = memory_cluster.a, memory_cluster.b
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
    push_files(memory_cluster.remote, {SHARD: forged + event("01C")})
    b.sync()
    # The summary of [A, B] no longer matches the file, so the repeated key is seen.
    assert b.read(SHARD) == merge_shard(forged + event("01C"), forged).data == event("01A") + event("01C")
    assert b.files.take_received()[SHARD] == [event("01C")]


def test_both_sides_appended_to_one_shard_take_the_exact_merge(memory_cluster):
    a, b = memory_cluster.a, memory_cluster.b
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


def test_replicate_received_torn_remote_line_is_terminated(memory_cluster):
    a, b = memory_cluster.a, memory_cluster.b
    append(a.worktree, SHARD, event("01A"), b'{"event_id": "01T", "ty')  # crashed mid-append
    a.sync()
    append(b.worktree, SHARD, event("01B"))
    b.sync()
    assert b.files.take_received()[SHARD] == [event("01A"), b'{"event_id": "01T", "ty\n']
    a.sync()
    assert a.read(SHARD) == b.read(SHARD) == event("01A") + b'{"event_id": "01T", "ty\n' + event("01B")


def test_replicator_refuses_a_path_that_is_not_the_worktree(cluster):
    with pytest.raises(SyncError):
        Replicator(cluster.a.repo)


def test_replicate_receives_10k_events_in_one_sync_and_a_no_op_touches_nothing(memory_cluster):
    """(How fast: scripts/bench_sync.py, never a wall-clock assert here.)"""
    a, b = memory_cluster.a, memory_cluster.b
    for i in range(10):
        append(
            a.worktree,
            f"messages/agent{i}/000001.jsonl",
            *(event(f"01{i:02d}{n:06d}", agent=f"agent{i}", body="hello " * 20) for n in range(1000)),
        )
    a.sync()
    report = b.sync()
    assert report.received == 10_000
    assert sum(len(lines) for lines in b.files.take_received().values()) == 10_000
    held = len(b.files.held)
    again = b.sync()
    assert (again.commits, again.received, again.sent) == (0, 0, 0)
    assert len(b.files.held) == held  # no chunk merged, no file handed over


def test_replicate_ignores_remote_entries_that_are_not_regular_files(cluster):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    # Someone hostile pushes a symlink where a shard should be.
    push_tree(cluster.remote, {"messages/evil/000001.jsonl": (b"/etc/passwd", pygit2.enums.FileMode.LINK)})
    report = b.sync()
    assert report.received == 1
    assert not (b.worktree / "messages/evil/000001.jsonl").exists()
    assert b.read(SHARD) == event("01A")


def test_has_remote_and_remote_url_do_not_wait_for_a_running_cycle(memory_cluster):
    r = memory_cluster.a.replicator
    done = []
    with r._mutex:  # a fetch in another thread holds it
        import threading

        t = threading.Thread(target=lambda: done.append((r.has_remote(), r.remote_url())))
        t.start()
        t.join(timeout=5)
    assert done == [(True, memory_cluster.a.store.remote_url("origin"))]


def test_run_cycle_commits_only_the_named_paths(memory_cluster):
    a = memory_cluster.a
    append(a.worktree, SHARD, event("01A"))
    append(a.worktree, "messages/bob/000001.jsonl", event("01B"))
    a.files.note_appended([SHARD])
    report = a.sync()
    assert report.commits == 1 and report.sent == 1
    assert committed_names(a.store, "messages") == ["alice"]
    assert committed_names(memory_cluster.remote, "messages") == ["alice"]


def test_replicator_removes_temp_files_left_by_a_crash(memory_cluster):
    a = memory_cluster.a
    append(a.worktree, SHARD, event("01A"))
    (a.worktree / "messages" / "alice" / ".thrum-tmp-000001.jsonl.999").write_bytes(b"half a merge")
    Replicator(a.worktree, store=a.store)
    assert sorted(p.name for p in (a.worktree / "messages" / "alice").iterdir()) == ["000001.jsonl"]


def test_ignored_paths_without_waiting_is_unknown_while_a_cycle_holds_the_replicator(memory_cluster):
    import threading

    a = memory_cluster.a
    held, release = threading.Event(), threading.Event()

    def cycle():  # stands for a fetch that waits on the network with the replicator's lock
        with a.replicator._mutex:
            held.set()
            release.wait()

    t = threading.Thread(target=cycle)
    t.start()
    try:
        held.wait()
        assert a.replicator.ignored_paths(wait=False) is None
    finally:
        release.set()
        t.join()
    assert a.replicator.ignored_paths(wait=False) == {}
    assert a.replicator.ignored_paths() == {}


def test_a_step_never_overwrites_a_sync_moved_by_another_process(memory_cluster):
    """The replicator moves a-sync by compare-and-swap from the head its step started from."""
    a = memory_cluster.a
    store = a.store
    append(a.worktree, SHARD, event("01A"))
    a.sync()
    started = head(a)
    elsewhere = store.batch().commit(store.commit(started).tree, [started], SIG, "another process\n")
    real_batch = store.batch

    def interloping_batch():  # another process moves a-sync while this step builds its commit
        batch = real_batch()
        real_commit = batch.commit

        def commit(*args):
            store.update_ref(SYNC_REF, elsewhere, "another process")
            return real_commit(*args)

        batch.commit = commit
        return batch

    store.batch = interloping_batch
    append(a.worktree, SHARD, event("01B"))
    with pytest.raises(SyncError, match="moved while this sync step ran"):
        a.commit([SHARD])
    assert head(a) == elsewhere  # theirs stays
    store.batch = real_batch
    assert a.commit([SHARD])  # the next step starts from where it is now
    assert store.commit(head(a)).parents == (elsewhere,)

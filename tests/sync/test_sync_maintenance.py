"""Object stores kept compact by git itself (`thrum.sync.maintenance`): valid, holding every
event, few packs, bytes per sync that do not grow; a path remote repacked without git ever
reading its config; nothing done (and doctor saying so) without a git that can."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
import zlib
from pathlib import Path

import pygit2
import pytest
import trio

from fixtures.repos.builders import AUTHOR, make_replicas
from sync_helpers import git_fsck
from thrum import events as ev
from thrum.daemon.tidy import Tidy
from thrum.store.log import EventLog
from thrum.sync import SyncError, maintenance, packdir
from thrum.sync.cycle import run_cycle
from thrum.sync.diagnose import maintenance_check
from thrum.sync.logaccess import PlainLog
from thrum.sync.replicate import Replicator
from thrum.sync.worktree import ensure_sync_worktree

SESSION = "ses_01JD5Q9W1Z8X7Y6V5T4S3R2Q1P"
AGENTS = [f"agent{i}" for i in range(5)]

pytestmark = pytest.mark.skipif(maintenance.unavailable() is not None, reason="needs git 2.32 or newer")


class Replica:
    def __init__(self, path: Path, remote: Path):
        self.path = path
        self.remote = remote
        self.worktree = ensure_sync_worktree(path)
        self.replicator = Replicator(self.worktree)
        self.log = EventLog(self.worktree)
        self.files = PlainLog(self.worktree)
        self.tidier = maintenance.Tidier(self.replicator.common_dir, path / ".git" / "thrum-sync" / "repack.git")

    def write(self, round_: int, n: int) -> int:
        """Append ``n`` events the daemon's way; their size in bytes."""
        events = [
            ev.MessageCreate(
                agent_id=AGENTS[(round_ + k) % len(AGENTS)],
                session_id=SESSION,
                body=ev.Body(f"round {round_} event {k}: the build is green again"),
            ).to_dict()
            for k in range(n)
        ]
        self.files.note_appended(self.log.append(events))
        return sum(len(ev.encode_line(e)) for e in events)

    def sync(self) -> None:
        report = run_cycle(self.replicator, self.files)
        self.log.forget_cached_state()
        assert report.pushed

    def rounds(self, stop: int, start: int = 0) -> None:
        """Rounds ``start`` to ``stop - 1``: two events each, synced (a pack each in every store)."""
        for r in range(start, stop):
            self.write(r, 2)
            self.sync()

    def tidy(self) -> list[str | None]:
        """What the daemon does after each sync: the roll-ups that are due, ours and the remote's."""
        repacks = self.tidier.due_repacks(self.remote, where="remote origin")
        return [self.tidier.run(repack) for repack in repacks]

    def jsonl(self) -> dict[str, bytes]:
        return {p.relative_to(self.worktree).as_posix(): p.read_bytes() for p in self.worktree.rglob("*.jsonl")}


def packs(store: Path) -> list[Path]:
    return sorted((store / "objects" / "pack").glob("*.pack"))


def _round_rolled_up(writer: Replica, roller: Replica, remote: Path, r: int, rolled: int) -> int:
    """Round ``r`` on ``writer``, then ``roller``'s roll-up of the remote if one is due: the
    remote's pack bytes after that roll-up (``rolled`` when none was due)."""
    writer.write(r, 2)
    writer.sync()
    objects = remote / "objects"
    if not roller.tidier.due(objects):
        return rolled
    assert roller.tidier.run(roller.tidier.remote_repack(remote)) is None
    return packdir.pack_bytes(objects)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.fixture(autouse=True)
def repacks_at_the_tests_priority(request, monkeypatch):
    """git's repacks run at the test's own priority, except in the tests of that priority
    (``scheduling_probe``). Niced in the parallel suite, they waited behind every other
    worker of its session (nice 10 gets ~10 % of a core beside nice 0): this file ran
    146 s there against 36 s alone, and ended the suite. What these tests assert is the
    stores' packs and contents, which the priority does not change."""
    if "scheduling_probe" not in request.fixturenames:
        monkeypatch.setattr(maintenance, "NICENESS", 0)


@pytest.fixture
def pair(tmp_path):
    replicas = make_replicas(tmp_path, 2)
    return replicas.remote, [Replica(p, replicas.remote) for p in replicas.clones]


def test_consolidated_stores_are_valid_and_hold_every_event(pair):
    remote, (a, b) = pair
    for r in range(40):
        a.write(r, 3)
        a.sync()
        b.write(r, 2)
        b.sync()
        assert all(failed is None for failed in a.tidy() + b.tidy())
    a.sync()
    for store in (a.replicator.common_dir, remote):
        assert len(packs(store)) <= 12  # a few syncs' packs and O(log n) rolled ones, not 80
    assert a.jsonl() == b.jsonl()
    assert sum(data.count(b"\n") for data in a.jsonl().values()) == 40 * 5
    c_path = remote.parent / "c"  # a third clone attaches through the consolidated remote
    pygit2.clone_repository(str(remote), str(c_path))
    assert Replica(c_path, remote).jsonl() == a.jsonl()


def test_the_users_own_objects_survive_every_roll_up(pair):
    remote, (a, b) = pair
    repo = pygit2.Repository(str(a.path))
    mine = []
    parent = repo.references["refs/heads/main"].target
    for i in range(30):  # the user's work, loose in the same object store
        blob = repo.create_blob(b"print(%d)\n" % i)
        tb = repo.TreeBuilder(repo[parent].tree)
        tb.insert(f"file{i}.py", blob, pygit2.enums.FileMode.BLOB)
        parent = repo.create_commit("refs/heads/main", AUTHOR, AUTHOR, f"work {i}\n", tb.write(), [parent])
        mine += [blob, parent]
    stray = repo.create_blob(b"a blob nothing refers to\n")  # git's own gc prunes it, in its time
    for r in range(20):
        a.write(r, 4)
        a.sync()
        a.tidy()
    fresh = pygit2.Repository(str(a.path))
    for oid in [*mine, stray]:
        assert fresh.odb.exists(oid)
    git_fsck(a.path)


def test_packs_roll_up_so_a_store_holds_few(pair):
    remote, (a, b) = pair
    a.tidier.new_packs = 2
    for r in range(60):
        a.write(r, 2)
        a.sync()
        a.tidy()
    assert 1 <= len(packs(remote)) <= 8
    assert 1 <= len(packs(a.replicator.common_dir)) <= 10
    git_fsck(remote)


def test_a_roll_up_runs_only_once_enough_packs_wait(pair):
    remote, (a, b) = pair
    objects = a.replicator.common_dir / "objects"
    a.tidier.done(objects)
    a.tidier.done(remote / "objects")
    start = len(packs(a.replicator.common_dir))
    a.rounds(3)
    assert not a.tidier.due(objects) and a.tidy() == []  # a listing decided: no git started
    a.rounds(maintenance.NEW_PACKS)
    assert len(packs(a.replicator.common_dir)) >= start + maintenance.NEW_PACKS
    assert a.tidier.due(objects)
    assert a.tidy() == [None, None]  # ours and the remote's, both rolled up
    assert len(packs(a.replicator.common_dir)) < start + maintenance.NEW_PACKS
    assert not a.tidier.due(objects)


def test_git_never_reads_a_path_remotes_config_hooks_or_refs(pair, tmp_path):
    """Whoever can write the shared remote writes its config: git is never run in it. Its
    objects are repacked from a private git directory of ours."""
    remote, (a, b) = pair
    a.tidier.new_packs = 1
    a.rounds(4)
    fired = tmp_path / "fired"
    honest = (remote / "config").read_text()
    (remote / "config").write_text(  # after the syncs: a format git refuses to open, and programs to run
        honest.replace("repositoryformatversion = 0", "repositoryformatversion = 99")
        + f"[core]\n\tfsmonitor = touch {fired}\n\thooksPath = {tmp_path}\n"
    )
    (tmp_path / "post-checkout").write_text(f"#!/bin/sh\ntouch {fired}\n")
    (tmp_path / "post-checkout").chmod(0o755)
    results = a.tidy()
    assert results == [None, None]  # git, had it opened the remote, would refuse version 99
    assert len(packs(remote)) == 1 and not fired.exists()
    (remote / "config").write_text(honest)
    git_fsck(remote)


def test_a_refused_path_remote_is_not_repacked(pair, tmp_path):
    remote, (a, b) = pair
    a.write(0, 2)
    a.sync()
    (remote / "objects" / "info" / "alternates").write_text(f"{tmp_path}\n")
    with pytest.raises(SyncError, match="points to another repository"):
        a.tidy()
    (remote / "objects" / "info" / "alternates").unlink()


@pytest.mark.soak  # 150 syncs and repacks (a minute on 2 cores): scripts/soak; figures: scripts/bench_storage.py
def test_bytes_each_sync_adds_stay_bounded_as_history_grows(pair):
    remote, (a, b) = pair
    rounds, raw = 150, 0
    sizes = []
    for r in range(rounds):
        raw += a.write(r, 5)
        a.sync()
        a.tidy()
        b.sync()
        b.tidy()
        sizes.append((_size(a.replicator.common_dir / "objects"), _size(remote / "objects")))
    for which in (0, 1):
        middle = (sizes[99][which] - sizes[50][which]) / 49
        end = (sizes[149][which] - sizes[100][which]) / 49
        assert end <= 1.5 * middle + 1024, (which, middle, end)
        assert end <= 4 * raw / rounds + 4096, (which, end, raw / rounds)  # a few KB per sync, not the history
    # The remote holds about the log's own bytes: the roll-ups delta-compress, and the packs of
    # the last few syncs (whole segment copies, not rolled up yet) add a bounded tail.
    assert sizes[-1][1] <= 1.5 * raw


def _deleted_packs_held(store: Path) -> int:
    """Packs of ``store`` this process still holds open or mapped after they were deleted."""
    pack_dir = str(store / "objects" / "pack")
    held = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(pack_dir) and target.endswith("(deleted)"):
            held.add(target)
    for line in Path("/proc/self/maps").read_text().splitlines():
        if pack_dir in line and line.endswith("(deleted)"):
            held.add(line.split(maxsplit=5)[-1])
    return len(held)


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs /proc")
def test_a_long_lived_replicator_lets_go_of_packs_a_roll_up_deleted(pair):
    """libgit2 never drops a pack that vanished from disk: a daemon's handle would keep
    every pack git's repack ever deleted open, mapped and searched on each lookup."""
    remote, (a, b) = pair
    a.tidier.new_packs = 2
    for r in range(20):
        a.write(r, 3)
        a.sync()
        a.tidy()
    a.write(20, 3)
    a.sync()
    assert a.replicator.store.pack_releases > 0
    assert _deleted_packs_held(a.replicator.common_dir) == 0
    a.write(21, 3)
    a.sync()  # and the handle still works: its tuning back, the history readable
    b.sync()
    assert a.jsonl() == b.jsonl()
    assert a.replicator.store.repo.config["pack.bigFileThreshold"] == "1"


def test_without_a_git_that_can_nothing_is_consolidated_and_doctor_says_so(pair, monkeypatch):
    remote, (a, b) = pair
    monkeypatch.setenv("PATH", "/nonexistent")
    assert maintenance.unavailable() == "git is not installed"
    a.tidier.new_packs = 1
    a.write(0, 2)
    a.sync()
    assert a.tidy() == []
    check = maintenance_check()
    assert check.status == "warn" and "not consolidated" in check.detail and "2.32" in check.action
    monkeypatch.undo()
    monkeypatch.setattr(maintenance, "git_version", lambda git=None: (2, 31))
    assert "older than 2.32" in maintenance.unavailable()
    assert maintenance_check().status == "warn"


def test_a_store_grown_by_the_factor_is_repacked_whole_and_keeps_every_event(pair):
    """Geometric roll-ups keep a whole copy of each segment per roll-up; once a store's packs
    grew by FULL_GROWTH since its last full repack, the roll-up is a full one."""
    remote, (a, b) = pair
    a.tidier.new_packs = 2
    objects = a.replicator.common_dir / "objects"
    kinds = []
    for r in range(40):
        a.write(r, 4)
        a.sync()
        kinds += [repack.full for repack in a.tidier.due_repacks(remote) if repack.objects == objects]
        a.tidy()
    assert kinds[0] is True  # never repacked whole: the first roll-up is a full one
    assert True in kinds[1:] and False in kinds  # and again once the packs doubled, geometric between
    # the record survives a restart: a new tidier does not start with a full repack
    again = maintenance.Tidier(a.replicator.common_dir, a.tidier.private)
    assert again.full_due(objects) == a.tidier.full_due(objects)
    b.sync()
    assert a.jsonl() == b.jsonl()
    git_fsck(a.path)
    git_fsck(remote)


def test_a_full_repack_keeps_a_pack_no_ref_names_yet(pair):
    """A sync step writes its pack, then moves its ref: a full repack in between must not
    drop the objects no ref names yet (``--keep-unreachable``)."""
    remote, (a, b) = pair
    a.write(0, 2)
    a.sync()
    batch = a.replicator.store.batch()
    blob = batch.write(3, b"written, its ref not moved yet\n")
    batch.flush()
    assert a.tidier.run(a.tidier.own_repack(full=True)) is None
    fresh = Replicator(a.worktree)
    assert fresh.store.read(blob) == (3, b"written, its ref not moved yet\n")
    assert len(packs(a.replicator.common_dir)) == 1
    git_fsck(a.path)


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_the_temporary_files_a_killed_repack_left_are_removed_and_nothing_else(pair):
    """git removes only its own process's temporary packs: a repack killed with the daemon
    (or at its time limit) leaves its staged pack behind for good, unless thrum removes it."""
    remote, (a, b) = pair
    a.rounds(3)
    git_dir = a.replicator.common_dir
    pack_dir = git_dir / "objects" / "pack"
    live = sorted(p.name for p in pack_dir.iterdir())
    # what a repack killed after its pack-objects finished leaves: the pack under repack's staging name
    subprocess.run(
        ["git", "--git-dir", str(git_dir), "pack-objects", "--revs", "--all", "-q", str(pack_dir / ".tmp-4242-pack")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    staged = sorted(p.name for p in pack_dir.glob(".tmp-4242-pack-*"))
    assert {Path(n).suffix for n in staged} >= {".pack", ".idx"}
    (pack_dir / "tmp_pack_Xk3Tq1").write_bytes(b"PACK\0\0\0\2 half written")  # pack-objects killed mid-write
    (pack_dir / "pack_git2_5f1e0c2b9a7d3e4f").write_bytes(b"PACK")  # libgit2's fetch, killed
    (pack_dir / "tmp_pack_R2d2C3").write_bytes(b"PACK")  # a repack writing right now: too young to touch
    for name in [*staged, "tmp_pack_Xk3Tq1", "pack_git2_5f1e0c2b9a7d3e4f", *live]:
        _age(pack_dir / name, packdir.STALE_TEMP_S + 60)
    assert not a.tidier.due(git_dir / "objects")  # the first look at a store sweeps it
    left = sorted(p.name for p in pack_dir.iterdir())
    assert left == sorted([*live, "tmp_pack_R2d2C3"])
    (pack_dir / "tmp_pack_R2d2C3").unlink()
    b.sync()
    assert a.jsonl() == b.jsonl()


def test_a_store_another_process_is_repacking_is_left_to_it(pair):
    """Two replicas share a path remote; two repacks of one store at once each delete the
    packs they listed, and the later one fails on a pack the other removed. The store's
    flock makes the second tidier skip it until the next time."""
    remote, (a, b) = pair
    a.tidier.new_packs = 1
    a.rounds(3)
    before = packs(remote)
    with packdir.locked_store(remote / "objects") as held:  # b's tidier, repacking the remote now
        assert held is not None
        assert packdir.lock_store(remote / "objects") is None
        assert a.tidy() == [None, None]  # ours rolled up, the remote's skipped: no failure either
        assert packs(remote) == before
        assert len(packs(a.replicator.common_dir)) == 1
    assert a.tidy() == [None]  # still due: rolled up now
    assert len(packs(remote)) == 1
    b.sync()
    assert a.jsonl() == b.jsonl()


def test_a_repack_over_its_time_is_ended_and_the_store_stays_whole(pair):
    remote, (a, b) = pair
    a.rounds(3)
    before = packs(a.replicator.common_dir)
    why = a.tidier.run(a.tidier.own_repack(full=True), timeout=0)
    assert why == "took longer than 0s"
    assert packs(a.replicator.common_dir) == before
    assert a.tidier.run(a.tidier.own_repack(full=True)) is None  # its lock was let go
    assert len(packs(a.replicator.common_dir)) == 1


# Segments of twelve agents whose paths end alike ("nt0/000001.jsonl"): git sorts blobs for its
# delta search by a hash of a path's last sixteen characters, so their versions mix by size.
_LIKE_NAMED = [f"{c}_agent0" for c in "abcdefghijkl"]


def _like_named_round(replica: Replica, r: int) -> None:
    events = [
        ev.MessageCreate(
            agent_id=name,
            session_id=SESSION,
            body=ev.Body(f"round {r}: the build is green, the review queue is clear, the release notes are next"),
        ).to_dict()
        for name in _LIKE_NAMED
    ]
    replica.files.note_appended(replica.log.append(events))
    replica.sync()


def _rounds_around_a_full_repack(replica: Replica, n: int) -> None:
    """``n`` rounds of `_like_named_round`, a full repack of the replica's store, ``n`` more."""
    for r in range(n):
        _like_named_round(replica, r)
    assert replica.tidier.run(replica.tidier.own_repack(full=True)) is None
    for r in range(n, 2 * n):
        _like_named_round(replica, r)


def _blob_bytes(git_dir: Path) -> int:
    """The bytes git's packs spend on blobs (whole and deltas), from `git verify-pack -v`."""
    total = 0
    for idx in (git_dir / "objects" / "pack").glob("*.idx"):
        listing = subprocess.run(["git", "verify-pack", "-v", str(idx)], capture_output=True, text=True, check=True)
        for line in listing.stdout.splitlines():
            f = line.split()
            if len(f) >= 5 and f[1] == "blob":
                total += int(f[3])
    return total


def test_each_segments_versions_delta_against_their_own_even_when_git_cannot_tell_their_names_apart(pair):
    """A segment's older versions are prefixes of its newer ones: a delta against its own next
    version is a few bytes. Against another agent's segment it is kilobytes; git's default
    window of 10 found those among twelve like-named segments and kept them: stores at 1.1x
    the raw log right after a full repack, 0.36x with a window of 30 (decisions.md)."""
    remote, (a, b) = pair
    for r in range(24):
        _like_named_round(a, r)
    finals = sum(len(zlib.compress(data)) for data in a.jsonl().values())  # the log once, compressed
    git_dir = a.replicator.common_dir
    assert a.tidier.run(a.tidier.own_repack(full=False)) is None  # a roll-up of the 24 syncs' packs
    assert len(packs(git_dir)) == 1
    assert _blob_bytes(git_dir) < 3 * finals  # measured: 2.3x (one whole copy a segment); git's default window: 6.7x
    assert a.tidier.run(a.tidier.own_repack(full=True)) is None
    # measured: 1.5x quiet, 2.1x once in a loaded suite (git's delta search splits the objects
    # among its threads, each window seeing fewer of a segment's versions); default window: 5.5x
    assert _blob_bytes(git_dir) < 2.5 * finals


def test_a_full_repack_of_the_shared_remote_by_one_replica_spares_the_other_its_own(pair):
    """Both replicas' tidiers look after the remote they share; each ran its own full repack
    of it at each doubling, twice the work. The full repack's pack carries a bitmap, and a
    tidier counts it as the remote's last full repack, whoever ran it."""
    remote, (a, b) = pair
    a.rounds(4)
    objects = remote / "objects"
    assert b.tidier.full_due(objects)  # never repacked whole
    assert a.tidier.run(a.tidier.remote_repack(remote, full=True)) is None
    assert not b.tidier.full_due(objects)
    a.rounds(40, start=4)
    assert b.tidier.run(b.tidier.remote_repack(remote)) is None  # b's next roll-up measures it ...
    assert b.tidier.full_due(objects)  # ... grown since: due again, for whichever replica comes first
    git_fsck(remote)


def test_a_full_repack_of_the_shared_remote_by_the_other_replica_still_counts_once_its_pack_is_rewritten(pair):
    """A roll-up (or the remote owner's own git) rewrites that pack without its bitmap; the
    other replica, its own record older, repacked the remote whole again (the storage run:
    the remote repacked whole about twice per doubling)."""
    remote, (a, b) = pair
    objects = remote / "objects"
    a.rounds(4)
    assert b.tidier.run(b.tidier.remote_repack(remote, full=True)) is None  # b's own, long ago
    a.rounds(40, start=4)
    assert a.tidier.run(a.tidier.remote_repack(remote, full=True)) is None  # a's, of the grown remote
    assert not b.tidier.full_due(objects)
    rewrite = ["git", "--git-dir", str(remote), "repack", "-a", "-d", "-q", "--no-write-bitmap-index"]
    subprocess.run(rewrite, check=True, capture_output=True)
    assert not list((objects / "pack").glob("*.bitmap"))
    assert not b.tidier.full_due(objects)
    git_fsck(remote)


def test_a_full_repack_of_the_shared_remote_outlives_the_roll_ups_after_it_for_the_other_replica(pair):
    """A roll-up takes the full repack's pack in once the packs since hold half as many
    objects (git weighs packs by their objects), long before the remote has doubled, and its
    bitmap was gone before the other replica looked: that one repacked the remote whole
    again (a storage run's logs: 9-10 full repacks of the remote where it doubled ~4 times).
    Roll-ups leave that pack be; the next full repack takes it in."""
    remote, (a, b) = pair
    objects = remote / "objects"
    a.rounds(30)
    assert a.tidier.run(a.tidier.remote_repack(remote, full=True)) is None
    (bitmap,) = (objects / "pack").glob("*.bitmap")
    full = packdir.bitmapped_bytes(objects)
    assert full is not None
    rolled, r = full, 30
    while rolled < 1.7 * full:  # syncs, rolled up as they come, b not looking
        r += 1
        rolled = _round_rolled_up(a, a, remote, r, rolled)
    assert bitmap.exists()  # the full repack's pack, as it was
    assert not b.tidier.full_due(objects)  # not doubled since: a's full repack counts for b too
    while not a.tidier.full_due(objects):  # until it has
        r += 1
        rolled = _round_rolled_up(a, a, remote, r, rolled)
    assert a.tidier.run(a.tidier.remote_repack(remote, full=True)) is None  # the next full one takes it in
    assert packdir.pack_count(objects) == 1 and not bitmap.exists()
    git_fsck(remote)


def test_a_full_repack_decided_before_the_other_replicas_ran_is_decided_again_once_the_lock_is_ours(pair):
    """The daemon decides its repacks together, then runs them one after the other: the
    other replica's full repack of the remote could run in between (while ours of our own
    store did), and ours of the remote followed it, the remote repacked whole twice in a
    row (a storage run's logs: b's full repack of the remote 1 s after a's ended)."""
    remote, (a, b) = pair
    objects = remote / "objects"
    a.rounds(30)
    assert b.tidier.full_due(objects)
    stale = b.tidier.remote_repack(remote, full=True)  # b's decision ...
    assert a.tidier.run(a.tidier.remote_repack(remote, full=True)) is None  # ... a's full repack meanwhile
    (bitmap,) = (objects / "pack").glob("*.bitmap")
    a.write(30, 2)
    a.sync()
    assert b.tidier.run(stale) is None  # ... b's turn: a roll-up at most
    assert bitmap.exists()
    assert not b.tidier.full_due(objects)
    git_fsck(remote)


def test_the_packs_syncs_added_during_a_full_repack_are_rolled_up_right_after_it(pair):
    """A full repack of a large store runs for minutes, the syncs beside it add a pack each:
    once it ends they are due at once (the storage run ended with 302 of them left)."""
    remote, (a, b) = pair
    objects = a.replicator.common_dir / "objects"
    a.rounds(maintenance.NEW_PACKS + 1)  # the packs of the syncs during the full repack
    a.tidier.done(objects, full=True)
    assert a.tidier.due(objects)


_PROBE = """#!/bin/sh
# git, after noting the CPU scheduling a repack runs under: its session's group and its nice
case " $* " in *" repack "*)
  echo "$(cat /proc/self/autogroup | cut -d' ' -f1) $(cut -d' ' -f19 /proc/$$/stat)" >> "{out}";;
esac
exec "{git}" "$@"
"""


@pytest.fixture
def scheduling_probe(tmp_path, monkeypatch):
    """A `git` first on PATH that records, for each repack, the scheduling group of its
    session and its nice value, then runs the real git; what it should record."""
    if not os.path.exists("/proc/self/autogroup"):
        pytest.skip("no autogroup scheduling here: a process's nice alone decides")
    real = shutil.which("git")
    assert real is not None
    bin_dir = tmp_path / "probe-bin"
    bin_dir.mkdir()
    out = tmp_path / "scheduling.txt"
    (bin_dir / "git").write_text(_PROBE.format(out=out, git=real))
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    # empty where the kernel has autogroups switched off (CI): then the nice alone is checked
    group = next(iter(Path("/proc/self/autogroup").read_text().split()), "")
    return out, f"{group} {min(19, os.getpriority(os.PRIO_PROCESS, 0) + maintenance.NICENESS)}"


def test_a_repack_yields_the_cpu_to_the_syncs_beside_it_offline(pair, scheduling_probe):
    """Linux shares the CPU between sessions first and applies a nice value only inside a
    session: a repack in a session of its own had an equal share beside the daemon's syncs
    (2.5x slower syncs in the storage run), and one whose whole session was lowered starved
    on a busy machine. It runs niced in our session (its own process group: ended as one)."""
    out, expected = scheduling_probe
    remote, (a, b) = pair
    a.rounds(3)
    assert a.tidier.run(a.tidier.own_repack(full=True)) is None
    assert a.tidier.run(a.tidier.remote_repack(remote, full=False)) is None
    assert out.read_text().splitlines() == [expected, expected]
    git_fsck(a.path)
    git_fsck(remote)


def _daemon_tidies(replica: Replica, count: int, remote: bool = True) -> list[str]:
    """The daemon's tidy task asked once (``remote``: the remote's store too), run until it has
    logged ``count`` repacks: their lines."""
    tidy = Tidy("origin", lambda: replica.replicator, lambda: remote)
    repacked: list[str] = []

    async def main() -> None:
        enough = trio.Event()

        class Repacked(logging.Handler):  # the tidy task logs each repack it ran, on trio's thread
            def emit(self, record: logging.LogRecord) -> None:
                if record.getMessage().startswith("repacked "):
                    repacked.append(record.getMessage())
                    if len(repacked) == count:
                        enough.set()

        handler = Repacked()
        logging.getLogger(maintenance.__name__).addHandler(handler)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(tidy.run)
                tidy.request()
                with trio.fail_after(60):
                    await enough.wait()
                nursery.cancel_scope.cancel()
        finally:
            logging.getLogger(maintenance.__name__).removeHandler(handler)

    trio.run(main)
    return repacked


def test_a_repack_the_daemon_runs_yields_the_cpu_to_its_syncs(pair, scheduling_probe, caplog):
    out, expected = scheduling_probe
    caplog.set_level(logging.INFO, logger=maintenance.__name__)
    remote, (a, b) = pair
    for r in range(maintenance.NEW_PACKS):  # a roll-up due for both stores
        a.write(r, 2)
        a.sync()
    _daemon_tidies(a, 2)
    assert out.read_text().splitlines() == [expected, expected]  # ours and the remote's
    git_fsck(a.path)
    git_fsck(remote)


def test_the_next_full_repack_counts_from_the_store_once_the_packs_beside_the_last_are_rolled_up(pair):
    """The syncs' packs that arrive while a full repack runs hold whole objects, several times
    their rolled-up size; counted as they were, they put the next full repack that much
    further off (a loaded 2,000-round storage run ended at 0.76x the raw log)."""
    remote, (a, b) = pair
    objects = a.replicator.common_dir / "objects"
    a.rounds(3)
    assert a.tidier.run(a.tidier.own_repack(full=True)) is None
    for r in range(3, 3 + 2 * maintenance.NEW_PACKS):  # the syncs while it ran ...
        a.write(r, 2)
        a.sync()
    a.tidier.done(objects, full=True)  # ... as if it ended now, beside their packs
    beside = packdir.pack_bytes(objects)
    assert a.tidier.run(a.tidier.own_repack(full=False)) is None  # the roll-up right after it
    rolled = packdir.pack_bytes(objects)
    assert rolled < beside / 2
    for r in range(100, 400):  # syncs, each rolled up, until the next full repack is due
        if a.tidier.full_due(objects):
            break
        a.write(r, 2)
        a.sync()
        assert a.tidier.run(a.tidier.own_repack(full=False)) is None
    assert a.tidier.full_due(objects)
    assert packdir.pack_bytes(objects) < 2 * beside  # not only at twice the store with that pile
    git_fsck(a.path)


def test_a_full_repack_is_due_by_the_store_as_rolled_up_not_with_the_syncs_whole_packs_since(pair):
    """A sync's pack holds whole objects, several times what they take rolled up: a store with
    a few of them looked doubled long before it was, and was repacked whole that much more
    often (in the storage run, at a fraction of the growth the rule asks)."""
    remote, (a, b) = pair
    objects = a.replicator.common_dir / "objects"
    a.rounds(3)
    assert a.tidier.run(a.tidier.own_repack(full=True)) is None
    assert a.tidier.run(a.tidier.own_repack(full=False)) is None
    base = packdir.pack_bytes(objects)
    r = 3
    while packdir.pack_bytes(objects) < 3 * base:  # syncs' packs, none rolled up yet
        r += 1
        a.write(r, 2)
        a.sync()
    assert not a.tidier.full_due(objects)
    assert a.tidier.run(a.tidier.own_repack(full=False)) is None
    assert a.tidier.full_due(objects) == (packdir.pack_bytes(objects) >= 2 * base)
    git_fsck(a.path)


def test_the_other_replicas_full_repack_of_the_remote_counts_from_our_next_roll_up_as_our_own_does(pair):
    """The replica that ran a full repack of the remote records the store after the roll-up
    of the syncs' packs beside it; the other one took the full pack's bytes alone, and was
    due for the next full repack early (a storage run: the remote repacked whole at 1.3-1.6x
    growth, ~9 times in 1,000 rounds). It counts from its own next roll-up now."""
    remote, (a, b) = pair
    objects = remote / "objects"
    a.rounds(40)
    assert b.tidier.run(b.tidier.remote_repack(remote)) is None  # b's roll-up, before
    assert a.tidier.run(a.tidier.remote_repack(remote, full=True)) is None
    full = packdir.bitmapped_bytes(objects)
    assert full is not None
    for r in range(40, 40 + 2 * maintenance.NEW_PACKS):  # the syncs while it ran ...
        a.write(r, 2)
        a.sync()
    a.tidier.done(objects, full=True)  # ... as if it ended now, beside their packs
    assert a.tidier.run(a.tidier.remote_repack(remote)) is None  # a's record: the store rolled up
    assert not b.tidier.full_due(objects)  # b takes a's full repack over
    assert b.tidier.run(b.tidier.remote_repack(remote)) is None  # b's next roll-up of the remote
    settled = packdir.pack_bytes(objects)
    assert 1.2 * full < settled < 2 * full, (full, settled)  # the pile beside the full pack, rolled up
    rolled, between, r = settled, 0, 100
    while rolled < 2 * settled:  # syncs, b rolling the remote up
        assert not b.tidier.full_due(objects), (rolled, full, settled)
        between += rolled >= 2 * full
        r += 1
        assert r < 400
        rolled = _round_rolled_up(a, b, remote, r, rolled)
    assert between  # looked at while grown past twice the full pack alone
    assert b.tidier.full_due(objects)  # past twice the store as it settled: due
    assert b.tidier.run(b.tidier.remote_repack(remote, full=True)) is None
    git_fsck(remote)


def _planted_pack(tmp_path: Path, size: int) -> list[Path]:
    """A valid pack of ``size`` random bytes with a bitmap beside it, built elsewhere: what a
    writer of the remote could drop into its ``objects/pack`` to look like a full repack."""
    scratch = tmp_path / "planted"
    subprocess.run(["git", "init", "-q", str(scratch)], check=True)
    (scratch / "noise").write_bytes(os.urandom(size))
    git = ["git", "-C", str(scratch), "-c", "user.name=x", "-c", "user.email=x@example.com"]
    subprocess.run([*git, "add", "noise"], check=True)
    subprocess.run([*git, "commit", "-qm", "noise"], check=True)
    subprocess.run([*git, "repack", "-a", "-d", "-q", "--write-bitmap-index"], check=True)
    (pack,) = (scratch / ".git" / "objects" / "pack").glob("*.pack")
    return [pack.with_suffix(suffix) for suffix in (".pack", ".idx", ".bitmap")]


def test_a_planted_full_repack_of_the_remote_holds_our_next_one_off_only_while_it_is_there(pair, tmp_path):
    """The remote is untrusted: a pack with a bitmap beside it is taken as the other replica's
    full repack, and the record is the store with it. Once it is gone, the store (smaller
    than the record) counts as it is: a large planted pack removed again must not put our
    next full repack off for good."""
    remote, (a, b) = pair
    objects = remote / "objects"
    a.rounds(3)
    assert b.tidier.run(b.tidier.remote_repack(remote, full=True)) is None
    assert b.tidier.run(b.tidier.remote_repack(remote)) is None
    planted = []
    for path in _planted_pack(tmp_path, 64 * packdir.pack_bytes(objects)):
        shutil.copy(path, objects / "pack" / path.name)
        planted.append(objects / "pack" / path.name)
    assert not b.tidier.full_due(objects)  # taken for a full repack by the other replica ...
    assert b.tidier.run(b.tidier.remote_repack(remote)) is None  # ... and counted with the store
    for path in planted:  # gone again
        path.unlink()
    base = rolled = packdir.pack_bytes(objects)
    r = 3
    while not b.tidier.full_due(objects):  # syncs, b rolling the remote up
        assert rolled < 3 * base, "the planted pack still holds the full repack off"
        r += 1
        rolled = _round_rolled_up(a, b, remote, r, rolled)
    assert b.tidier.run(b.tidier.remote_repack(remote, full=True)) is None
    git_fsck(remote)


def _stored(git_dir: Path) -> dict[str, str]:
    """Each packed blob's delta base ("" when stored whole), from `git verify-pack -v`."""
    out = {}
    for idx in (git_dir / "objects" / "pack").glob("*.idx"):
        listing = subprocess.run(["git", "verify-pack", "-v", str(idx)], capture_output=True, text=True, check=True)
        for line in listing.stdout.splitlines():
            f = line.split()
            if len(f) >= 5 and f[1] == "blob":
                out[f[0]] = f[6] if len(f) >= 7 else ""
    return out


@pytest.mark.parametrize("store", ["own", "remote"])
def test_a_full_repack_searches_only_what_came_since_the_last_full_repacks_pack(pair, store):
    """A full repack searched every object's delta again: its cost was the whole store, paid
    at each doubling (the 5,000-round storage run: 36 of them, ~15 s of CPU each, beside 98 %
    of the last syncs). The deltas of the last full repack's pack are taken as they are now,
    whoever wrote it (here git's default window, whose deltas against other agents' segments
    a search with ours would replace), and only what came since is searched; the store ends
    as one pack with the mark another replica reads."""
    remote, (a, b) = pair
    git_dir = a.replicator.common_dir if store == "own" else remote
    for r in range(12):
        _like_named_round(a, r)
    bare = ["git", "--git-dir", str(git_dir), "repack", "-a", "-d", "-q", "-f", "--window=10", "--keep-unreachable"]
    subprocess.run([*bare, "--write-bitmap-index"], check=True, capture_output=True)
    before = {oid: base for oid, base in _stored(git_dir).items() if base}
    assert len(before) > 100
    for r in range(12, 24):
        _like_named_round(a, r)
    a.tidier.full_growth = 1.0  # due now, that pack adopted as the last full repack or not
    repack = a.tidier.own_repack(full=True) if store == "own" else a.tidier.remote_repack(remote, full=True)
    assert a.tidier.run(repack) is None
    after = _stored(git_dir)
    assert all(after[oid] == base for oid, base in before.items())  # the last full pack's deltas: as they were
    new = [base for oid, base in after.items() if oid not in before]
    assert sum(1 for base in new if base) > len(new) / 2  # what came since: searched
    assert len(packs(git_dir)) == 1 and len(list((git_dir / "objects" / "pack").glob("*.bitmap"))) == 1
    b.sync()
    assert a.jsonl() == b.jsonl()
    git_fsck(git_dir)


def test_a_store_repacked_whole_twice_stays_as_compact_as_one_repacked_whole_once(pair):
    """The second full repack searches only what came since the first's pack: the versions of
    a segment on either side of it cannot delta against each other there, and are merged with
    deltas reused after. The cost: about one whole copy of each segment open at the time."""
    remote, (a, b) = pair
    git_dir = a.replicator.common_dir
    _rounds_around_a_full_repack(a, 12)
    full = packdir.bitmapped_pack(git_dir / "objects")
    assert full is not None
    assert a.tidier.run(a.tidier.own_repack(full=False)) is None
    assert packdir.bitmapped_pack(git_dir / "objects") == full  # a roll-up leaves the full repack's pack out ...
    a.tidier.full_growth = 1.0  # due now
    assert a.tidier.run(a.tidier.own_repack(full=True)) is None
    assert len(packs(git_dir)) == 1  # ... the next full repack takes it in
    twice = _blob_bytes(git_dir)
    finals = sum(len(zlib.compress(data)) for data in a.jsonl().values())  # the log once, compressed
    subprocess.run(
        ["git", "--git-dir", str(git_dir), "repack", "-a", "-d", "-f", "-q", f"--window={maintenance.WINDOW}"],
        check=True,
        capture_output=True,
    )
    once = _blob_bytes(git_dir)  # everything searched in one go
    assert twice < once + finals / 2, (twice, once, finals)
    git_fsck(a.path)


def test_a_full_repack_stopped_between_its_steps_leaves_a_whole_store_the_next_one_completes(pair):
    """A full repack is two runs of git; a daemon stopped between them leaves the last full
    repack's pack and the new one: valid, every event there, and the next full repack merges them."""
    remote, (a, b) = pair
    git_dir = a.replicator.common_dir
    _rounds_around_a_full_repack(a, 6)
    first, _ = a.tidier.own_repack(full=True).steps
    subprocess.run(first, env=a.tidier.own_repack().env, check=True, capture_output=True)
    assert len(packs(git_dir)) == 2
    git_fsck(a.path)
    a.tidier.full_growth = 1.0  # due now
    assert a.tidier.run(a.tidier.own_repack(full=True)) is None
    assert len(packs(git_dir)) == 1
    b.sync()
    assert a.jsonl() == b.jsonl()
    git_fsck(a.path)


def test_the_daemons_full_repack_runs_both_steps_and_leaves_one_pack_with_the_mark(pair, caplog):
    """The daemon's tidy task runs a full repack's two runs of git under one lock and one time
    limit: the last full repack's pack and what came since end as one pack with a bitmap."""
    caplog.set_level(logging.INFO, logger=maintenance.__name__)
    remote, (a, b) = pair
    git_dir = a.replicator.common_dir
    _rounds_around_a_full_repack(a, 4)
    full = packdir.bitmapped_pack(git_dir / "objects")
    for r in range(8, 8 + maintenance.NEW_PACKS):  # whole-object packs: the store looks doubled to a new tidier
        a.write(r, 2)
        a.sync()
    (line,) = _daemon_tidies(a, 1, remote=False)
    assert "(full)" in line, line
    assert len(packs(git_dir)) == 1
    now = packdir.bitmapped_pack(git_dir / "objects")
    assert full is not None and now is not None and now[0] != full[0]  # merged into a new pack, marked
    git_fsck(git_dir)
    b.sync()
    assert a.jsonl() == b.jsonl()


_FAILING_REPACK = """#!/bin/sh
# git, except that a repack fails as on a full disk
case " $* " in *" repack "*) echo "fatal: unable to write pack: No space left on device" >&2; exit 128;; esac
exec "{git}" "$@"
"""


def test_a_failed_repack_is_shown_by_doctor_until_one_works(pair, tmp_path, monkeypatch):
    """A failed repack never fails a sync and was only logged (by the daemon, or by an offline
    sync's detached child): a store whose repacks kept failing grew by a pack of whole
    objects per sync unseen. `thrum doctor` warns with git's reason until a repack works."""
    remote, (a, b) = pair
    a.rounds(maintenance.NEW_PACKS)
    assert maintenance_check(a.path).status == "ok"
    real = shutil.which("git")
    bin_dir = tmp_path / "failing-bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(_FAILING_REPACK.format(git=real))
    (bin_dir / "git").chmod(0o755)
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{path}")
    assert "No space left on device" in (a.tidier.run(a.tidier.own_repack()) or "")
    check = maintenance_check(a.path)
    assert check.status == "warn"
    assert "No space left on device" in check.detail and str(a.replicator.common_dir / "objects") in check.detail
    assert maintenance_check(b.path).status == "ok"  # another replica's stores are not this one's
    monkeypatch.setenv("PATH", path)
    assert a.tidier.run(a.tidier.own_repack()) is None
    assert maintenance_check(a.path).status == "ok"
    git_fsck(a.path)

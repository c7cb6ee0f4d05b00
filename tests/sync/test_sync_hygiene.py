"""Object stores that stay compact over many syncs: consolidated loose objects and packs
(`thrum.sync.hygiene`), checked by git itself, and bytes per sync that do not grow."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pygit2
import pytest

from fixtures.repos.builders import AUTHOR, make_replicas
from sync_helpers import git_fsck
from thrum import events as ev
from thrum.store.log import EventLog
from thrum.sync import hygiene, hygiene_child
from thrum.sync.cycle import run_cycle
from thrum.sync.gitstore.packs import read_index
from thrum.sync.logaccess import PlainLog
from thrum.sync.replicate import Replicator
from thrum.sync.worktree import ensure_sync_worktree

SESSION = "ses_01JD5Q9W1Z8X7Y6V5T4S3R2Q1P"
AGENTS = [f"agent{i}" for i in range(5)]


class Replica:
    def __init__(self, path: Path):
        self.path = path
        self.worktree = ensure_sync_worktree(path)
        self.replicator = Replicator(self.worktree)
        self.log = EventLog(self.worktree)
        self.files = PlainLog(self.worktree)

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

    def tidy(self, remote: Path, trigger: int = hygiene.LOOSE_TRIGGER) -> None:
        """What the daemon does after each sync."""
        hygiene.consolidate(self.replicator.common_dir, loose_trigger=trigger)
        hygiene.consolidate(remote, loose_trigger=trigger)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.fixture
def pair(tmp_path):
    replicas = make_replicas(tmp_path, 2)
    return replicas.remote, [Replica(p) for p in replicas.clones]


def test_consolidated_stores_are_valid_and_hold_every_event(pair):
    remote, (a, b) = pair
    for r in range(60):
        a.write(r, 3)
        a.sync()
        b.write(r, 2)
        b.sync()
        a.tidy(remote, trigger=32)
        b.tidy(remote, trigger=32)
    a.sync()
    for repo in (a.path, b.path, remote):
        git_fsck(repo)
    objects = a.replicator.common_dir / "objects"
    assert hygiene.loose_count(objects) < 64
    assert hygiene.loose_count(remote / "objects") < 64
    assert len(list((objects / "pack").glob("*.pack"))) <= 8
    files_a = {p.relative_to(a.worktree): p.read_bytes() for p in a.worktree.rglob("*.jsonl")}
    files_b = {p.relative_to(b.worktree): p.read_bytes() for p in b.worktree.rglob("*.jsonl")}
    assert files_a == files_b
    assert sum(data.count(b"\n") for data in files_a.values()) == 60 * 5
    # A third clone attaches through the consolidated remote and gets everything.
    c_path = remote.parent / "c"
    pygit2.clone_repository(str(remote), str(c_path))
    c = Replica(c_path)
    assert {p.relative_to(c.worktree): p.read_bytes() for p in c.worktree.rglob("*.jsonl")} == files_a


def test_the_users_own_loose_objects_are_left_alone(pair):
    remote, (a, b) = pair
    repo = pygit2.Repository(str(a.path))
    mine = []
    parent = repo.references["refs/heads/main"].target
    for i in range(40):  # the user's work, loose in the same object store
        blob = repo.create_blob(b"print(%d)\n" % i)
        tb = repo.TreeBuilder(repo[parent].tree)
        tb.insert(f"file{i}.py", blob, pygit2.enums.FileMode.BLOB)
        parent = repo.create_commit("refs/heads/main", AUTHOR, AUTHOR, f"work {i}\n", tb.write(), [parent])
        mine += [blob, parent]
    for r in range(30):
        a.write(r, 4)
        a.sync()
        a.tidy(remote, trigger=16)
    objects = a.replicator.common_dir / "objects"
    for oid in mine:
        assert (objects / str(oid)[:2] / str(oid)[2:]).is_file(), "a loose object of the user's was packed"
    ours = set()
    for idx in (objects / "pack").glob("*.idx"):
        ours.update(read_index(idx))
    assert not ours & {oid.raw for oid in mine}
    git_fsck(a.path)


def test_packs_roll_up_so_a_store_holds_few(pair):
    remote, (a, b) = pair
    for r in range(120):
        a.write(r, 2)
        a.sync()
        a.tidy(remote, trigger=8)  # a pack every few syncs: many packs to roll up
    packs = list((remote / "objects" / "pack").glob("*.pack"))
    assert 1 <= len(packs) <= 8
    assert hygiene.loose_count(remote / "objects") < 16
    git_fsck(remote)


def test_a_record_line_written_through_the_remote_cannot_make_a_roll_up_delete_elsewhere(pair, tmp_path):
    """Whoever can push to a shared remote can write its pack record: a name that walks
    out of ``objects/pack`` (to a real pack of ours, whose objects the remote also holds)
    is ignored, never rolled up and deleted."""
    remote, (a, b) = pair
    for r in range(3):
        a.write(r, 3)
        a.sync()
    victim = tmp_path / "mine" / "objects" / "pack"
    victim.mkdir(parents=True)
    name = min(p.stem for p in (remote / "objects" / "pack").glob("*.pack"))
    for suffix in (".pack", ".idx"):
        shutil.copy(remote / "objects" / "pack" / f"{name}{suffix}", victim / f"{name}{suffix}")
    (remote / "objects" / "pack" / "pack-").mkdir()
    escape = f"pack-/../../../../{victim.relative_to(tmp_path)}/{name}"
    assert (remote / "objects" / "pack" / f"{escape}.idx").resolve() == (victim / f"{name}.idx").resolve()
    with open(remote / "objects" / "info" / "thrum-packs", "a") as f:
        f.write(escape + "\n")
    for r in range(hygiene.MAX_PACKS + 2):
        a.write(r, 3)
        a.sync()
        hygiene.consolidate(remote)
    assert (victim / f"{name}.pack").is_file() and (victim / f"{name}.idx").is_file()
    assert escape not in (remote / "objects" / "info" / "thrum-packs").read_text()
    git_fsck(remote)


def test_a_link_planted_among_the_remotes_leftovers_is_not_followed(pair, tmp_path):
    """Consolidation removes staging directories a dead process left in the object store;
    in a shared remote, one of those names may be a link to a directory of ours."""
    remote, (a, b) = pair
    mine = tmp_path / "mine"
    (mine / "pack").mkdir(parents=True)
    (mine / "notes.txt").write_text("keep me\n")
    (mine / "pack" / "tmp.pack").write_text("keep me too\n")
    os.utime(mine, (0, 0))  # as old as a leftover
    (remote / "objects" / "thrum-tmp-1-planted").symlink_to(mine)
    left = remote / "objects" / "thrum-tmp-2-left"  # a real leftover, with a link inside
    (left / "pack").mkdir(parents=True)
    (left / "pack" / "link").symlink_to(mine / "notes.txt")
    (left / "pack" / "tmp.pack").write_bytes(b"PACK")
    os.utime(left, (0, 0))
    hygiene.consolidate(remote)
    assert (mine / "notes.txt").read_text() == "keep me\n" and (mine / "pack" / "tmp.pack").is_file()
    assert not left.exists()


def test_a_store_being_consolidated_elsewhere_is_skipped(pair):
    remote, (a, b) = pair
    (remote / "objects" / "thrum-consolidate.lock").write_text("123\n")
    report = hygiene.consolidate(remote, loose_trigger=1)
    assert report.skipped and report.new_packs == []


def test_bytes_each_sync_adds_stay_bounded_as_history_grows(pair):
    remote, (a, b) = pair
    rounds, raw = 180, 0
    sizes = []
    for r in range(rounds):
        raw += a.write(r, 5)
        a.sync()
        a.tidy(remote)
        b.sync()
        b.tidy(remote)
        sizes.append((_size(a.replicator.common_dir / "objects"), _size(remote / "objects")))
    for which in (0, 1):
        middle = (sizes[119][which] - sizes[60][which]) / 59
        end = (sizes[179][which] - sizes[120][which]) / 59
        assert end <= 1.5 * middle + 512, (which, middle, end)
        assert end <= 4 * raw / rounds + 2048, (which, end, raw / rounds)  # a few KB per sync, not the history
    assert sizes[-1][1] <= raw  # the remote holds no more than the log's own bytes
    git_fsck(remote)


def test_the_daemon_consolidates_in_a_child_process_only_when_there_is_work(pair):
    """Reading a whole store leaves memory behind in the reading process: the daemon
    hands the work to a child, and starts one only when a round has something to do:
    here, when enough syncs left their small packs (`hygiene.ROLL_MIN`)."""
    remote, (a, b) = pair
    store = a.replicator.common_dir
    for r in range(hygiene.ROLL_MIN - 2):
        a.write(r, 3)
        a.sync()
    assert not hygiene.has_work(store)
    assert hygiene_child.consolidate_in_child(store) == hygiene.Consolidation()
    for r in range(2):
        a.write(r, 3)
        a.sync()
    packs_before = len(list((store / "objects" / "pack").glob("*.pack")))
    assert hygiene.has_work(store)
    report = hygiene_child.consolidate_in_child(store)
    assert report.skipped is None and report.packs_rolled >= hygiene.ROLL_MIN and len(report.new_packs) == 1
    assert (store / "objects" / "pack" / f"{report.new_packs[0]}.pack").is_file()
    assert len(list((store / "objects" / "pack").glob("*.pack"))) <= packs_before - hygiene.ROLL_MIN + 1
    assert not hygiene.has_work(store)
    git_fsck(a.path)


def test_a_few_syncs_whole_blobs_do_not_drag_the_history_into_each_roll_up(pair):
    """A sync's pack holds whole blobs, a rolled-up pack deltas: weighed by bytes, a few
    syncs' packs outweigh the history and every roll-up would rewrite all of it. Packs
    are weighed by object count, so a roll-up takes the small packs and leaves the
    history's pack alone."""
    remote, (a, b) = pair
    store = a.replicator.common_dir
    for r in range(100):  # a history, in one pack
        a.write(r, 5)
        a.sync()
        if r % 20 == 19:
            a.tidy(remote)
    for _ in range(3):
        if hygiene.has_work(store):
            hygiene.consolidate(store)
    history = max((store / "objects" / "pack").glob("*.pack"), key=lambda p: p.stat().st_size)
    for r in range(hygiene.ROLL_MIN):  # then a few syncs of the biggest files
        a.write(r, 60)
        a.sync()
    small = [
        p for p in (store / "objects" / "pack").glob("*.pack") if p.stat().st_mtime_ns > history.stat().st_mtime_ns
    ]
    assert sum(p.stat().st_size for p in small) > history.stat().st_size  # more bytes than the history
    report = hygiene.consolidate(store)
    assert report.packs_rolled >= hygiene.ROLL_MIN
    assert history.is_file()  # not rewritten
    git_fsck(a.path)


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
def test_a_long_lived_replicator_lets_go_of_packs_consolidation_deleted(pair):
    """libgit2 never drops a pack that vanished from disk: a daemon's handle would keep
    every pack consolidation ever deleted open, mapped and searched on each lookup."""
    remote, (a, b) = pair
    for r in range(40):
        a.write(r, 3)
        a.sync()
        a.tidy(remote, trigger=16)  # a new pack, and old ones rolled up and deleted, every few rounds
    a.write(40, 3)
    a.sync()
    assert a.replicator._packs.releases > 0
    assert _deleted_packs_held(a.replicator.common_dir) == 0
    a.write(41, 3)
    a.sync()  # and the handle still works: its tuning back, the history readable
    b.sync()
    files_a = {p.relative_to(a.worktree): p.read_bytes() for p in a.worktree.rglob("*.jsonl")}
    assert files_a == {p.relative_to(b.worktree): p.read_bytes() for p in b.worktree.rglob("*.jsonl")}
    assert (Path(a.replicator.repo.path) / "thrum-pack.config").is_file()
    assert a.replicator.repo.config["pack.bigFileThreshold"] == "1"


def test_the_loose_count_the_daemon_asks_after_each_sync_is_a_fair_estimate(tmp_path):
    """`has_work` runs after every sync for two stores: it lists an eighth of the fan-out
    directories, not all 256, and still sees when the trigger is reached."""
    repo = pygit2.init_repository(str(tmp_path / "s.git"), bare=True)
    for i in range(1000):
        repo.create_blob(b"object %d\n" % i)
    objects = tmp_path / "s.git" / "objects"
    assert hygiene.loose_count(objects) == 1000
    assert 700 <= hygiene.loose_count(objects, sample=32) <= 1300
    assert hygiene.has_work(tmp_path / "s.git", loose_trigger=256)
    assert not hygiene.has_work(tmp_path / "s.git", loose_trigger=4000)

"""An offline sync's full repack runs in a child the sync leaves behind (`thrum.sync.fullrepack`):
`thrum sync` from cron returns once its cycle is done, not minutes later (130 s on a
1,000,000-event history), and frees its locks for a daemon; the repack still completes,
never twice at once on one store; ``THRUM_TIDY_DETACH=0`` keeps it inline."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from fixtures.repos.builders import make_replicas
from sync_helpers import git_fsck
from thrum import events as ev
from thrum.paths import ThrumPaths
from thrum.store.log import EventLog
from thrum.sync import fullrepack, maintenance, packdir
from thrum.sync.cycle import run_cycle
from thrum.sync.logaccess import PlainLog
from thrum.sync.offline import offline_sync_running, run_offline
from thrum.sync.replicate import Replicator
from thrum.sync.worktree import ensure_sync_worktree

pytestmark = pytest.mark.skipif(maintenance.unavailable() is not None, reason="needs git 2.32 or newer")

SESSION = "ses_01JD5Q9W1Z8X7Y6V5T4S3R2Q1P"
DEADLINE_S = 60.0

# A `git` first on PATH: each repack notes its store when it starts and when it ends, and
# waits until the test lets it go; every other command is the real git.
_PROBE = """#!/bin/sh
case " $* " in *" repack "*)
  store="${{GIT_OBJECT_DIRECTORY:-$2/objects}}"
  echo "start $store $$" >> "{record}"
  while [ ! -e "{release}" ]; do sleep 0.02; done
  "{git}" "$@"; status=$?
  echo "end $store $$" >> "{record}"
  exit $status;;
esac
exec "{git}" "$@"
"""


class Probe:
    def __init__(self, tmp_path: Path):
        real = shutil.which("git")
        assert real is not None
        self.record = tmp_path / "repacks.txt"
        self.release = tmp_path / "release"
        self.bin = tmp_path / "probe-bin"
        self.bin.mkdir()
        (self.bin / "git").write_text(_PROBE.format(record=self.record, release=self.release, git=real))
        (self.bin / "git").chmod(0o755)

    def lines(self) -> list[list[str]]:
        return [line.split() for line in self.record.read_text().splitlines()] if self.record.exists() else []

    def started(self) -> list[str]:
        return [store for what, store, _ in self.lines() if what == "start"]

    def let_go(self) -> None:
        self.release.touch()


def _until(check, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while not (found := check()):
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.02)
    return found


def _detached_repacks() -> list[int]:
    return fullrepack.running_children()


def _held_by_another(objects: Path) -> bool:
    with packdir.locked_store(objects) as lock:
        return lock is None


class Machine:
    """A clone whose store (and the path remote's) is due its first roll-up, a full repack."""

    def __init__(self, path: Path, remote: Path):
        self.path = path
        self.remote = remote
        self.paths = ThrumPaths(path, path / ".thrum")
        worktree = ensure_sync_worktree(path)
        self.log = EventLog(worktree)
        self.files = PlainLog(worktree)
        replicator = Replicator(worktree)
        for n in range(maintenance.NEW_PACKS):
            self.write(n)
            assert run_cycle(replicator, self.files).pushed
            self.log.forget_cached_state()
        self.objects = replicator.common_dir / "objects"

    def write(self, n: int) -> None:
        event = ev.MessageCreate(agent_id="agent0", session_id=SESSION, body=ev.Body(f"event {n}")).to_dict()
        self.files.note_appended(self.log.append([event]))

    def sync_offline(self, n: int) -> dict:
        """One `thrum sync` with the daemon stopped, in a thread: an inline repack waiting for
        the probe would otherwise hang the test instead of failing it."""
        self.write(n)
        out: dict = {}
        thread = threading.Thread(target=lambda: out.update(run_offline(self.paths)), daemon=True)
        thread.start()
        thread.join(DEADLINE_S)
        assert not thread.is_alive(), "the offline sync waited for its repack"
        return out

    def daemon_log(self) -> str:
        return self.paths.log_file.read_text() if self.paths.log_file.exists() else ""


@pytest.fixture
def probe(tmp_path, monkeypatch):
    probe = Probe(tmp_path)
    monkeypatch.setenv("PATH", f"{probe.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("THRUM_TIDY_DETACH", raising=False)
    yield probe
    probe.let_go()  # every repack we started ends: none outlives the test
    deadline = time.monotonic() + DEADLINE_S
    while (left := _detached_repacks()) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in left:
        os.killpg(pid, signal.SIGKILL)


@pytest.fixture
def machine(tmp_path):
    replicas = make_replicas(tmp_path, 1)
    return Machine(replicas.clones[0], replicas.remote)


def test_an_offline_sync_returns_before_its_full_repack_which_completes_in_a_child(machine, probe):
    result = machine.sync_offline(100)
    assert result["pushed"]
    # the cycle is done and its locks are free (a daemon may start) while the repack waits
    assert not offline_sync_running(machine.paths)
    fd = os.open(machine.paths.lock_file, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the sync still held it
    finally:
        os.close(fd)
    assert _detached_repacks(), "no child repacks the store"
    # git runs under the store's lock: looked at only once it started (a look before could
    # hold the lock the moment the child tries it, and make it leave the store alone)
    _until(lambda: probe.started() == [str(machine.objects)], "the child's repack of our store")
    assert _held_by_another(machine.objects)

    probe.let_go()
    _until(lambda: not _detached_repacks(), "the detached repack to end")
    ends = [store for what, store, _ in probe.lines() if what == "end"]
    assert ends == [str(machine.objects), str(machine.remote / "objects")]  # both stores, in turn
    for objects in (machine.objects, machine.remote / "objects"):
        assert packdir.pack_count(objects) == 1 and packdir.bitmapped_pack(objects) is not None, objects
    assert "(full)" in machine.daemon_log()
    git_fsck(machine.path)
    git_fsck(machine.remote)


def test_two_offline_syncs_in_a_row_never_repack_one_store_twice_at_once(machine, probe):
    machine.sync_offline(100)
    _until(lambda: probe.started() == [str(machine.objects)], "the first child's repack of our store")
    machine.sync_offline(101)  # its store is still due a full repack: the first has not run yet
    _until(
        lambda: f"not repacking {machine.objects}: another process is" in machine.daemon_log(),
        "the second child to leave our store to the first",
    )
    probe.let_go()
    _until(lambda: not _detached_repacks(), "both children to end")
    running: dict[str, int] = {}
    for what, store, _ in probe.lines():
        running[store] = running.get(store, 0) + (1 if what == "start" else -1)
        assert running[store] <= 1, f"two repacks of {store} at once: {probe.lines()}"
    assert probe.started().count(str(machine.objects)) == 1, probe.lines()
    git_fsck(machine.path)
    git_fsck(machine.remote)


def test_with_detaching_off_the_offline_sync_repacks_before_it_returns(machine, probe, monkeypatch):
    monkeypatch.setenv("THRUM_TIDY_DETACH", "0")
    probe.let_go()
    machine.sync_offline(100)
    assert not _detached_repacks()
    assert [store for what, store, _ in probe.lines() if what == "end"] == [
        str(machine.objects),
        str(machine.remote / "objects"),
    ]
    for objects in (machine.objects, machine.remote / "objects"):
        assert packdir.pack_count(objects) == 1 and packdir.bitmapped_pack(objects) is not None, objects
    git_fsck(machine.path)
    git_fsck(machine.remote)

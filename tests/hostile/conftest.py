"""Hostile-remote fixtures: replicas of a bare remote (each with its daemon, driven through
the installed CLI) and an attacker who pushes to that remote with plain git.

Most tests start from the same honest team (agents registered, synced, a message or
two delivered). Building it through the CLI costs seconds of daemon starts and syncs,
so `team.prepared(name, build)` builds each such starting point once per run (daemons
stopped; the first parallel worker to ask builds it, the others wait for it), and every
test gets its own copy of the whole directory: remote,
clones, their ``.thrum`` state and sync worktrees, relocated to the test's directory
(the paths git and thrum wrote down are rewritten) with the daemons started afresh.
The copy is the state the CLI built, byte for byte; the test does to it what it likes.
As after any restart of a machine's daemon, each agent's session ended at the stop (the
replicas synced that offline, so the copy starts with nothing unpushed) and a new one
starts with its first call.

The machines write no heartbeats of their own accord (``THRUM_PRESENCE_INTERVAL``):
one written after a sync, at a moment of the scheduler's choosing, makes replicas
differ, and a copied team's agents would be due one on their first call.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "replication"))

from fixtures.repos.builders import ReplicaPair, clone, make_replicas  # noqa: E402
from hostile_helpers import Attacker  # noqa: E402
from fixtures.repos.fsck import fsck_each_repository, fsck_expect  # noqa: F401, E402 - every test ends with git fsck --full
from replication_helpers import Machine, machine_env  # noqa: E402
from fixtures.waiting import until  # noqa: E402
from thrum import lifecycle  # noqa: E402
from thrum.paths import resolve  # noqa: E402

PRESENCE = {"THRUM_PRESENCE_INTERVAL": "3600"}  # longer than any suite: no heartbeat of its own accord


def team_env() -> dict:
    return machine_env(**PRESENCE)


class Team:
    """A bare remote, the machines that sync through it, and a way to add fresh clones."""

    def __init__(self, base: Path, n: int, *, copied: bool = False):
        self.base = base
        if copied:  # a prepared team's copy (`TeamFactory.prepared`): initialised already
            clones = sorted(p for p in base.iterdir() if (p / ".thrum").is_dir())
            self.replicas = ReplicaPair(remote=(base / "remote.git").resolve(), clones=clones)
            self.machines = [Machine(p, team_env()) for p in self.replicas.clones]
            for m in self.machines:
                m.paths = resolve(m.path)
        else:
            self.replicas = make_replicas(base, n)
            self.machines = [Machine(p, team_env()).init() for p in self.replicas.clones]
        self.remote = self.replicas.remote
        self._attackers = 0

    def fresh_clone(self, name: str) -> Machine:
        """A new clone of the remote, initialised now (it attaches to the remote's a-sync)."""
        clone(self.remote, self.base / name)
        m = Machine(self.base / name, team_env()).init()
        self.machines.append(m)
        return m

    def attacker(self) -> Attacker:
        self._attackers += 1
        return Attacker(self.remote, self.base / f"mallory{self._attackers}")

    def start(self) -> None:
        """Start every machine's daemon (`thrum daemon start`, in the test's process: a
        `thrum` process each cost ~0.1 s of CPU more, and starting them side by side
        saved no time on a machine whose cores the parallel suite keeps busy)."""
        for m in self.machines:
            m.run("daemon", "start")

    def stop(self) -> None:
        for m in self.machines:
            try:
                m.stop()
            except Exception:
                pass


def relocate(old: Path, new: Path) -> None:
    """Rewrite the absolute paths git and thrum wrote down under ``new`` (a copy of ``old``):
    remote URLs, the sync worktree's links, identities' checkouts, sync state. Files with
    NUL bytes (objects, indexes, databases) hold none of them and are left alone."""
    before, after = str(old).encode(), str(new).encode()
    for dirpath, _dirs, files in os.walk(new):
        for name in files:
            path = os.path.join(dirpath, name)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            data = Path(path).read_bytes()
            if before in data and b"\0" not in data:
                Path(path).write_bytes(data.replace(before, after))


def _not_regular(directory: str, names: list[str]) -> list[str]:
    """Sockets and other special files a stopped daemon may leave: not copied."""
    return [
        n
        for n in names
        if not stat.S_ISREG((st := os.lstat(os.path.join(directory, n))).st_mode)
        and not stat.S_ISDIR(st.st_mode)
        and not stat.S_ISLNK(st.st_mode)
    ]


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has closed its files
    except (FileNotFoundError, ProcessLookupError):
        return False


def _wait_exited(pids: list[int | None]) -> None:
    """Until the daemons stopped have exited, not only released their lock: the last of
    their database connections closes after it (and removes the -wal and -shm files)."""
    until(lambda: not any(pid and _running(pid) for pid in pids), "the prepared team's daemons to exit")


_PREPARED: dict[str, Path] = {}  # name -> the prepared team's directory (daemons stopped), shared by the run


class TeamFactory:
    """``team(n)``: a new team of n initialised machines; ``team.prepared(name, build)``:
    a copy of the team ``build(team(2))`` left (built once per run, whichever worker asks first)."""

    def __init__(self, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory):
        self.tmp_path = tmp_path
        self.tmp_path_factory = tmp_path_factory
        self.made: list[Team] = []

    def _base(self) -> Path:
        return self.tmp_path / f"team{len(self.made)}"

    def __call__(self, n: int = 2) -> Team:
        t = Team(self._base(), n)
        self.made.append(t)
        return t

    def prepared(self, name: str, build: Callable[[Team], object], n: int = 2) -> Team:
        template = _PREPARED.get(name)
        if template is None:
            template = _PREPARED[name] = self._template(name, build, n)
        base = self._base()
        shutil.copytree(template, base, symlinks=True, ignore=_not_regular)
        relocate(template, base)
        t = Team(base, n, copied=True)
        self.made.append(t)
        t.start()
        return t

    def _template(self, name: str, build: Callable[[Team], object], n: int) -> Path:
        """The prepared team's directory, built by the first test process of the run that
        asks for it (the parallel workers share the run's temporary root); the others wait
        for it and copy it too."""
        shared = self.tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            shared = shared.parent  # the run's root, above each worker's own
        home = shared / f"prepared-{name}-{n}"
        with open(shared / f"prepared-{name}-{n}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (home / "built").exists():
                shutil.rmtree(home, ignore_errors=True)  # a build that failed part-way
                t = Team(home / "team", n)
                try:
                    build(t)
                finally:
                    pids = [lifecycle.read_pid(m.paths) for m in t.machines]
                    t.stop()
                _wait_exited(pids)
                for m in [*t.machines, *t.machines[:-1]]:  # offline: the stops' session ends, on every replica
                    m.run("sync")
                (home / "built").touch()
        return home / "team"

    def stop(self) -> None:
        for t in self.made:
            t.stop()


@pytest.fixture
def team(tmp_path, tmp_path_factory):
    """Factory: team(n) -> Team with n initialised machines; team.prepared(name, build) ->
    a copy of a team built once per run (daemons stopped at teardown)."""
    factory = TeamFactory(tmp_path, tmp_path_factory)
    yield factory
    factory.stop()

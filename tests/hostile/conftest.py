"""Hostile-remote fixtures: replicas of a bare remote (each with its daemon, driven through
the installed CLI) and an attacker who pushes to that remote with plain git."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "replication"))

from fixtures.repos.builders import clone, make_replicas  # noqa: E402
from hostile_helpers import Attacker  # noqa: E402
from fixtures.repos.fsck import fsck_each_repository, fsck_expect  # noqa: F401, E402 - every test ends with git fsck --full
from replication_helpers import Machine, machine_env  # noqa: E402


class Team:
    """A bare remote, the machines that sync through it, and a way to add fresh clones."""

    def __init__(self, base: Path, n: int):
        self.base = base
        self.replicas = make_replicas(base, n)
        self.remote = self.replicas.remote
        self.machines = [Machine(p, machine_env()).init() for p in self.replicas.clones]
        self._attackers = 0

    def fresh_clone(self, name: str) -> Machine:
        """A new clone of the remote, initialised now (it attaches to the remote's a-sync)."""
        clone(self.remote, self.base / name)
        m = Machine(self.base / name, machine_env()).init()
        self.machines.append(m)
        return m

    def attacker(self) -> Attacker:
        self._attackers += 1
        return Attacker(self.remote, self.base / f"mallory{self._attackers}")

    def stop(self) -> None:
        for m in self.machines:
            try:
                m.stop()
            except Exception:
                pass


@pytest.fixture
def team(tmp_path):
    """Factory: team(n) -> Team with n initialised machines (daemons stopped at teardown)."""
    made: list[Team] = []

    def make(n: int = 2) -> Team:
        t = Team(tmp_path / f"team{len(made)}", n)
        made.append(t)
        return t

    yield make
    for t in made:
        t.stop()

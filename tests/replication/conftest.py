"""Replica fixtures: a bare remote and clones, each clone a machine with its own daemon."""

from __future__ import annotations

import pytest

from fixtures.repos.builders import make_replicas
from replication_helpers import Machine, machine_env


@pytest.fixture
def machines(tmp_path):
    """Factory: machines(n, **env) -> list of initialised Machines (stopped at teardown)."""
    made: list[Machine] = []

    def make(n: int = 2, **env) -> list[Machine]:
        replicas = make_replicas(tmp_path / f"set{len(made)}", n)
        out = [Machine(path, machine_env(**env)).init() for path in replicas.clones]
        made.extend(out)
        return out

    yield make
    for m in made:
        try:
            m.stop()
        except Exception:
            pass

"""Faults and load: real daemons pushed past their limits (issue 15)."""

from __future__ import annotations

import pytest

from faults_helpers import start_daemon
from fixtures.repos.fsck import fsck_each_repository, fsck_expect  # noqa: F401 - every test ends with git fsck --full


@pytest.fixture
def fresh(tmp_path):
    """Factory: ``fresh(config)`` starts a daemon for this test only (stopped at teardown)."""
    started = []

    def make(config: dict | None = None, name: str = "d", **kw):
        d = start_daemon(tmp_path / name, config, **kw)
        started.append(d)
        return d

    yield make
    for d in started:
        d.stop()

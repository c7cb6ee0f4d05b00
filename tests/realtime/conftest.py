"""Fixtures for the real-time tests: real daemons in temp git repositories.

``shared`` is one daemon for the whole directory (tests use their own agent
names and scopes, so they never see each other's events); ``fresh`` starts a
daemon of the test's own, with config, for tests that restart it, need a small
queue or watch every event.
"""

from __future__ import annotations

import pytest

from realtime_helpers import Daemon, start_daemon


@pytest.fixture(scope="session")
def shared(tmp_path_factory) -> Daemon:
    d = start_daemon(tmp_path_factory.mktemp("shared"))
    yield d
    d.stop()


@pytest.fixture
def fresh(tmp_path):
    """Factory: ``fresh(config)`` starts a daemon for this test only (stopped at teardown)."""
    started: list[Daemon] = []

    def make(config: dict | None = None, name: str = "d") -> Daemon:
        d = start_daemon(tmp_path / name, config)
        started.append(d)
        return d

    yield make
    for d in started:
        d.stop()

"""Fixtures for the MCP tests: real daemons in temp git repositories.

``bus`` is one daemon for a whole test module (tests register agents of their own,
so they never see each other's messages); ``fresh`` starts a daemon for one test
(restarts, syncs).
"""

from __future__ import annotations

import pytest

from mcp_helpers import start_daemon


@pytest.fixture(scope="module")
def bus(tmp_path_factory):
    d = start_daemon(tmp_path_factory.mktemp("mcp"))
    yield d
    d.stop()


@pytest.fixture
def fresh(tmp_path):
    started = []

    def make(config: dict | None = None, name: str = "d", repo=None):
        d = start_daemon(tmp_path / name, config, repo=repo)
        started.append(d)
        return d

    yield make
    for d in started:
        d.stop()

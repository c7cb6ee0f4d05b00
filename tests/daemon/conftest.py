"""Real daemons in real temp git repositories, talked to over the real socket."""

from __future__ import annotations

import pytest

from fixtures.repos.builders import make_repo
from thrum import lifecycle

from daemon_helpers import RawClient


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    make_repo(path)
    return path


@pytest.fixture
def daemon(repo, monkeypatch):
    """An initialised repository with its daemon running; stopped at teardown."""
    monkeypatch.setenv("THRUM_LOCAL", "1")
    monkeypatch.setenv("THRUM_WS_PORT", "0")
    paths = lifecycle.init_repo(repo)
    yield paths
    lifecycle.stop(paths)


@pytest.fixture
def client(daemon):
    c = RawClient(daemon)
    yield c
    c.close()

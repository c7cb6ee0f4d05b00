"""Real daemons in real temp git repositories, talked to over the real socket."""

from __future__ import annotations

import itertools

import pytest

from fixtures.repos.builders import make_repo
from thrum import lifecycle

from daemon_helpers import RawClient


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    make_repo(path)
    return path


def _started(repo, mp: pytest.MonkeyPatch):
    """Initialise ``repo`` and start its daemon (local only, WebSocket on a free port)."""
    mp.setenv("THRUM_LOCAL", "1")
    mp.setenv("THRUM_WS_PORT", "0")
    return lifecycle.init_repo(repo)


@pytest.fixture
def daemon(repo, monkeypatch):
    """An initialised repository with its daemon running; stopped at teardown."""
    paths = _started(repo, monkeypatch)
    yield paths
    lifecycle.stop(paths)


@pytest.fixture
def client(daemon):
    c = RawClient(daemon)
    yield c
    c.close()


_test_numbers = itertools.count()


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory):
    """One daemon for the tests that need no repository of their own: each names its
    agents and roles with a prefix of its own (`names`), so none sees another's."""
    repo = tmp_path_factory.mktemp("rpc") / "repo"
    make_repo(repo)
    with pytest.MonkeyPatch.context() as mp:
        paths = _started(repo, mp)
    yield paths
    lifecycle.stop(paths)


@pytest.fixture
def shared(shared_daemon):
    c = RawClient(shared_daemon)
    yield c
    c.close()


@pytest.fixture
def names():
    """``names("alice", "bob")``: those names with this test's own prefix (t7_alice, ...)."""
    prefix = f"t{next(_test_numbers)}_"

    def make(*plain: str) -> list[str]:
        return [prefix + n for n in plain]

    return make

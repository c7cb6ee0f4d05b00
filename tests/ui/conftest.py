"""Fixtures for the Web UI tests: repositories with their daemon (started by the
installed CLI), and a headless Chromium for the browser tests (skipped, with the
command that installs it, where Chromium is missing)."""

from __future__ import annotations

import pytest

from fixtures.repos.builders import make_repo
from ui_helpers import Repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Repo:
    """One initialised repository (local only) for a whole test module."""
    path = tmp_path_factory.mktemp("ui") / "repo"
    make_repo(path)
    r = Repo(path, THRUM_LOCAL="1").init()
    yield r
    r.stop()


@pytest.fixture
def fresh_repo(tmp_path) -> Repo:
    path = tmp_path / "repo"
    make_repo(path)
    r = Repo(path, THRUM_LOCAL="1").init()
    yield r
    r.stop()

"""End-to-end fixtures: temp git repositories driven through the INSTALLED
``thrum`` executable (subprocess), with the real daemon.

Every repository made here has its daemon stopped at teardown, whatever the
test did. One initialised repository is shared per test module (`shared`);
tests keep out of each other's way with their own agents and scopes.
"""

from __future__ import annotations

import pytest

import e2e_helpers
from e2e_helpers import Repo
from fixtures.repos.builders import make_repo

repo_factory = e2e_helpers.repo_factory  # the fixture, shared with tests/hooks


@pytest.fixture(scope="module")
def shared(repo_factory) -> Repo:
    """One initialised repository for a whole test module."""
    return repo_factory("shared")


@pytest.fixture
def fresh(tmp_path) -> Repo:
    """A repository of its own (not initialised), stopped at teardown."""
    path = tmp_path / "repo"
    make_repo(path)
    r = Repo(path)
    yield r
    r.stop()

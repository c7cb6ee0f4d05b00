"""Fixtures for the Gas City mail provider: a fresh git repository per test, the
provider run as gc runs it (from a directory outside the repository), and its
daemon stopped at teardown whatever the test did."""

from __future__ import annotations

import pytest

from fixtures.repos.builders import make_repo
from gc_exec import Provider
from thrum import lifecycle
from thrum.paths import resolve


def stop_daemon(repo) -> None:
    paths = resolve(repo)
    if paths.initialized:
        lifecycle.stop(paths)


@pytest.fixture
def city(tmp_path):
    """A fresh git repository (no thrum yet) and a working directory outside it."""
    repo = tmp_path / "city"
    make_repo(repo)
    elsewhere = tmp_path / "elsewhere" / "deep"
    elsewhere.mkdir(parents=True)
    yield repo, elsewhere
    stop_daemon(repo)


@pytest.fixture
def provider(city) -> Provider:
    """The provider after gc's first call of every process: ensure-running."""
    repo, elsewhere = city
    p = Provider(repo, elsewhere)
    p.ensure_running()
    return p

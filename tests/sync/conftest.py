"""Fixtures for the sync tests (helpers live in ``sync_helpers``)."""

from __future__ import annotations

import pytest

from fixtures.repos.fsck import fsck_each_repository, fsck_expect  # noqa: F401 - every test ends with git fsck --full
from sync_helpers import Cluster, make_cluster, make_memory_cluster


@pytest.fixture
def cluster(tmp_path) -> Cluster:
    """Two clones (a, b) of one bare remote, each with its a-sync worktree and replicator."""
    return make_cluster(tmp_path, 2)


@pytest.fixture
def cluster3(tmp_path) -> Cluster:
    return make_cluster(tmp_path, 3)


@pytest.fixture
def memory_cluster(tmp_path) -> Cluster:
    """Two replicas (a, b) of one remote, their git stores in memory (`gitstore.memory`)."""
    return make_memory_cluster(tmp_path, 2)


@pytest.fixture
def memory_cluster3(tmp_path) -> Cluster:
    return make_memory_cluster(tmp_path, 3)

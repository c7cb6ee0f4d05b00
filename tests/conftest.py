"""Fixtures shared by the whole suite (keep this small; directories add their own)."""

from __future__ import annotations

import pytest

from thrum.store import database
from thrum.store.log import EventLog


@pytest.fixture
def tmp_log(tmp_path) -> EventLog:
    """An empty event log rooted at ``tmp_path/log`` (the a-sync worktree layout)."""
    root = tmp_path / "log"
    root.mkdir()
    return EventLog(root)


@pytest.fixture
def db(tmp_path):
    """A projection database file with the full schema, closed after the test."""
    opened = database.open_database(tmp_path / "messages.db")
    database.create_schema(opened)
    yield opened
    opened.close()


def pytest_collection_modifyitems(config, items) -> None:
    """The order files start in, for the parallel workers (scripts/test: ``--dist loadfile
    --no-loadscope-reorder``): files marked ``long_file`` first, then the rest by how many
    tests they hold, most first (pytest-xdist's own order), each file's tests in their
    order. A long file started last keeps one worker busy after the others are done."""
    by_file: dict[str, list] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def weight(tests: list) -> tuple[int, int]:
        return (0 if tests[0].get_closest_marker("long_file") else 1, -len(tests))

    items[:] = [item for tests in sorted(by_file.values(), key=weight) for item in tests]

"""Fixtures shared by the whole suite (keep this small; directories add their own)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from thrum.store import database
from thrum.store.log import EventLog

# An offline sync's full repack runs inline in the suite (`thrum.sync.fullrepack`): a child
# left behind would repack a store while its test goes on (git fsck, the next sync, a
# daemon's start) or deletes it. tests/sync/test_sync_offline_tidy.py detaches again.
os.environ["THRUM_TIDY_DETACH"] = "0"


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


FILE_SECONDS = Path(__file__).with_name("file_seconds.json")  # scripts/file_seconds.py writes it


def pytest_collection_modifyitems(config, items) -> None:
    """The order files start in, for the parallel workers (scripts/test: ``--dist loadfile
    --no-loadscope-reorder``): the longest first, by the seconds a whole run measured
    (tests/file_seconds.json); of the files it does not know yet, those marked ``long_file``
    first and the others as long as their tests times the typical test. Each file's tests
    keep their order. A long file started last keeps one worker busy after the others are
    done; ordered by test count, the one-test files of 10-30 s came last."""
    by_file: dict[str, list] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    try:
        seconds: dict[str, float] = json.loads(FILE_SECONDS.read_text())
    except (OSError, ValueError):
        seconds = {}
    known = [f for f in by_file if f in seconds]
    per_test = sum(seconds[f] for f in known) / max(1, sum(len(by_file[f]) for f in known)) or 1.0

    def weight(file: str) -> float:
        tests = by_file[file]
        if file in seconds:
            return -seconds[file]
        return -math.inf if tests[0].get_closest_marker("long_file") else -len(tests) * per_test

    items[:] = [item for file in sorted(by_file, key=weight) for item in by_file[file]]

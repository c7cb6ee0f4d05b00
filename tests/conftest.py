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

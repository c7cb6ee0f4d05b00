"""Start-up's coverage check (`store.coverage`): it runs at every start that kept the
projection, and finds and folds again a log file whose events the projection lost; a
start that rebuilt the projection from the whole log skips it (covered by construction:
at a million events the check re-reads ~11,000 files' last lines, issue 29)."""

from __future__ import annotations

import sqlite3

import pytest

from thrum import config as config_mod
from thrum import lifecycle
from thrum.daemon.startup import Store, open_store
from thrum.trust.keys import LocalKeys

from daemon_helpers import RawClient, register


@pytest.fixture
def stopped(daemon):
    """A repository whose daemon folded alice's five messages, then stopped; (paths, message ids)."""
    c = RawClient(daemon)
    try:
        register(c, "alice", "implementer")
        ids = [c.call("message.send", {"caller": "alice", "content": f"n{i}"})["message_id"] for i in range(5)]
    finally:
        c.close()
    lifecycle.stop(daemon)
    return daemon, ids


def _open(paths) -> Store:
    """What the daemon's start opens (in this process: the daemon is stopped, nobody holds its flock)."""
    return open_store(paths, config_mod.load(paths.config), LocalKeys(paths.identities))


def _messages(store: Store) -> set[str]:
    rows = store.writer.db.execute_sql("SELECT message_id FROM messages WHERE agent_id='alice'")
    return {message_id for (message_id,) in rows.fetchall()}


def test_a_start_that_rebuilt_the_projection_skips_the_coverage_check(stopped):
    paths, ids = stopped
    for suffix in ("", "-wal", "-shm"):  # a new machine's first start, or a database thrown away
        paths.database.with_name(paths.database.name + suffix).unlink(missing_ok=True)
    store = _open(paths)
    try:
        assert store.rebuilt
        assert store.repaired is None  # not checked
        assert _messages(store) == set(ids)
    finally:
        store.writer.close()


def test_a_start_that_kept_the_projection_finds_and_folds_a_file_it_missed(stopped):
    paths, ids = stopped
    with sqlite3.connect(paths.database) as db:  # what a restored or hand-edited file looks like
        db.execute("DELETE FROM messages WHERE message_id=?", (ids[-1],))
    store = _open(paths)
    try:
        assert not store.rebuilt
        assert store.repaired is not None and len(store.repaired) == 1
        assert store.repaired[0].startswith("messages/alice/")
        assert _messages(store) == set(ids)
    finally:
        store.writer.close()
    store = _open(paths)  # and the next start finds nothing to repair
    try:
        assert store.repaired == ()
    finally:
        store.writer.close()

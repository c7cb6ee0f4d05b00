"""A rebuild's load keeps no journal (`rebuild.LOAD_PRAGMAS`, journal_mode=OFF), where
SQLite's ``ROLLBACK TO`` undoes nothing. When an event makes a handler fail after the
batch wrote part of its rows, the fold must not refold the batch one event at a time on top
of those rows: the rebuild loads again with a journal, and ends where folding the log as it
grew ends (found by the engineer "rows", 2026-11-27)."""

from __future__ import annotations

from thrum.store import database, message_fold, projection

from store_helpers import Events
from test_rebuild_equivalence import rows


def test_a_rebuild_batch_whose_handler_fails_ends_as_the_incremental_fold(db, tmp_log, tmp_path, monkeypatch):
    e = Events()
    records = [e.register("alice", "dev"), e.register("bob", "qa")]
    records += [e.create("alice", f"note {i}", mentions=["bob"]) for i in range(20)]
    records += [e.create("alice", "boom"), *(e.create("bob", f"later {i}") for i in range(5))]
    tmp_log.append([d for _, d in records])
    real = message_fold.message_create

    def writes_then_fails(f, batch):
        applied = real(f, batch)  # the rows are written before the failure: a journal must undo them
        if any(d["body"]["content"] == "boom" for d in batch):
            raise ValueError("a handler met what it cannot apply")
        return applied

    monkeypatch.setattr(message_fold, "message_create", writes_then_fails)
    projection.catch_up(db, tmp_log)  # the daemon's fold, with a journal
    rebuilt = database.open_database(tmp_path / "rebuilt.db")
    try:
        result = projection.rebuild(rebuilt, tmp_log)
        bodies = [r[0] for r in rebuilt.execute_sql("SELECT body_content FROM messages").fetchall()]
        assert "boom" not in bodies and len(bodies) == 25
        assert result.invalid == 1
        assert rows(rebuilt) == rows(db)
    finally:
        rebuilt.close()

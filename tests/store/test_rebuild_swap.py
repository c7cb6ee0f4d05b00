"""A rebuild is built beside the projection and swapped in: reads are served throughout (issue 29)."""

from __future__ import annotations

import threading

import pytest
import trio

from thrum.daemon.writer import Writer
from thrum.store import database, projection, queries, search_beside

from store_helpers import Events, mid


class GatedFold:
    """A `projection.FoldFn` that holds the rebuild in the middle of its load until the test
    lets it go: the new file then exists, half built, while the old one still answers."""

    def __init__(self):
        self.entered = threading.Event()
        self.gate = threading.Event()

    def __call__(self, db, records, lines, *, issues=(), positions=None, keep_applied=True):
        self.entered.set()
        assert self.gate.wait(60), "the test never let the rebuild go on"
        return projection.fold(db, records, issues=issues, positions=positions, keep_applied=keep_applied)

    def release(self):
        pass  # nothing loaded


async def test_reads_are_served_from_the_old_projection_until_the_new_one_is_swapped_in(db, tmp_log, tmp_path):
    e = Events()
    creates = [e.create("alice", f"note {i}", mentions=["bob"]) for i in range(30)]
    tmp_log.append([d for _, d in [e.register("alice", "dev"), e.register("bob", "qa"), *creates]])
    projection.catch_up(db, tmp_log)
    expected = queries.list_messages(db, viewer="bob", page_size=100)
    assert expected["total"] == 30
    gated = GatedFold()
    writer = Writer(db, tmp_log, fold_lines=gated, db_path=tmp_path / "messages.db")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.view.rebuild, "a test asked for it")
        await trio.to_thread.run_sync(gated.entered.wait, 60)  # the rebuild is under way
        for _ in range(3):
            assert await writer.read(queries.list_messages, viewer="bob", page_size=100) == expected
        one = await writer.read(queries.get_message, mid(creates[7]), viewer="bob")
        assert one["message"]["body"]["content"] == "note 7"
        assert writer.view.rebuilds == 0 and writer.db is db  # still the old projection
        gated.gate.set()
    assert writer.view.rebuilds == 1 and writer.db is not db  # the new one took its place
    try:
        assert await writer.read(queries.list_messages, viewer="bob", page_size=100) == expected
    finally:
        writer.db.close()


async def test_a_rebuild_whose_search_index_fails_beside_leaves_the_old_projection_serving(
    db, tmp_log, tmp_path, monkeypatch
):
    """The search index of a large history's rebuild is built on a second connection
    (`search_beside`); when that fails, the rebuild fails before anything is swapped in: the
    old projection keeps answering, and the next rebuild, once the failure is gone, is whole."""
    e = Events()
    creates = [e.create("alice", f"note {i}", mentions=["bob"]) for i in range(30)]
    tmp_log.append([d for _, d in [e.register("alice", "dev"), e.register("bob", "qa"), *creates]])
    projection.catch_up(db, tmp_log)
    expected = queries.list_messages(db, viewer="bob", page_size=100)
    monkeypatch.setattr(search_beside, "MIN_MESSAGES", 0)  # the way a large history's is built
    side = tmp_path / "messages.db.rebuild.search"  # where the second connection writes: it cannot
    side.mkdir()
    (side / "x").write_text("")
    writer = Writer(db, tmp_log, db_path=tmp_path / "messages.db")
    with pytest.raises(search_beside.SearchIndexFailed):
        await trio.to_thread.run_sync(writer.view.rebuild_locked, "a test asked for it")
    assert writer.view.rebuilds == 0 and writer.db is db and not writer.view.rebuilding
    assert await writer.read(queries.list_messages, viewer="bob", page_size=100) == expected
    (side / "x").unlink()
    side.rmdir()
    await writer.view.rebuild("a test asked again")
    assert writer.view.rebuilds == 1 and writer.db is not db
    try:
        assert await writer.read(queries.list_messages, viewer="bob", page_size=100) == expected
        assert database.schema_version(writer.db) == database.SCHEMA_VERSION
    finally:
        writer.db.close()


async def test_a_rebuild_whose_log_reader_fails_is_never_swapped_in(db, tmp_log, tmp_path, monkeypatch):
    """The daemon's rebuild reads a large log ahead in a thread; when that reader fails (an
    unreadable segment), the rebuild says why and the old projection goes on serving."""
    from thrum.store import readahead, rebuild
    from thrum.store.log import EventLog

    e = Events()
    creates = [e.create("alice", f"note {i}", mentions=["bob"]) for i in range(30)]
    tmp_log.append([d for _, d in [e.register("alice", "dev"), e.register("bob", "qa"), *creates]])
    projection.catch_up(db, tmp_log)
    expected = queries.list_messages(db, viewer="bob", page_size=100)
    read_shard = EventLog.read_shard

    def failing(self, shard, pos, result, **kw):
        if shard.startswith("messages/"):
            raise OSError(5, "Input/output error")
        return read_shard(self, shard, pos, result, **kw)

    monkeypatch.setattr(rebuild, "READ_AHEAD_BYTES", 1)  # this small log is read ahead too
    monkeypatch.setattr(EventLog, "read_shard", failing)
    writer = Writer(db, tmp_log, fold_lines=GatedFold(), db_path=tmp_path / "messages.db")
    writer.fold_lines.gate.set()
    with pytest.raises(readahead.ReaderFailed, match="Input/output error"):
        await writer.view.rebuild("a test asked for it")
    assert writer.view.rebuilds == 0 and writer.db is db and not writer.view.rebuilding
    assert await writer.read(queries.list_messages, viewer="bob", page_size=100) == expected

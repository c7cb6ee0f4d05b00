"""A rebuild whose log is read ahead by a thread (`thrum.store.readahead`) builds the
projection a rebuild reading in turn with its fold builds, trust check included; a reader
that fails stops the rebuild with its reason, never a hang or a database that looks
complete (issue 29)."""

from __future__ import annotations

import os
import threading

import pytest
from test_rebuild_equivalence import rows

from fixtures.signed import SigningAgent as Agent
from thrum.store import database, projection, readahead, rebuild
from thrum.store.log import EventLog
from thrum.store.verified import VerifiedFold
from thrum.trust.ring import KeyRing
from thrum.trust.verify import Verifier


def _write(root, shard: str, lines: list[bytes]) -> None:
    path = root / shard
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))


@pytest.fixture
def hostile_log(tmp_path) -> EventLog:
    """Registrations learned mid-log (alice's session starts wait for her registration,
    two segments on), an agent that never registers (bob), forgeries (mallory signing as
    alice), lines that are no events, and a torn last line."""
    alice, bob, carol, mallory = Agent("alice"), Agent("bob"), Agent("carol"), Agent("mallory")
    root = tmp_path / "log"
    _write(root, "events/000001.jsonl", [carol.register(), alice.start(), b"not json at all\n", bob.start()])
    _write(root, "events/000002.jsonl", [carol.start(), b'{"type": "message.create"}\n', alice.register()])
    _write(
        root,
        "messages/alice/000001.jsonl",
        [alice.send(f"a{i}") for i in range(6)] + [alice.send("forged", key=mallory.private)] + [alice.send("last")],
    )
    _write(root, "messages/bob/000001.jsonl", [bob.send(f"b{i}") for i in range(3)])
    _write(root, "messages/carol/000001.jsonl", [carol.send(f"c{i}") for i in range(5)] + [b'{"type":"mess'])
    return EventLog(root)


def _rebuilt(tmp_path, event_log: EventLog, name: str, reader: str):
    fold = VerifiedFold(Verifier(KeyRing(None, None)))
    db = database.open_database(tmp_path / f"{name}.db")
    result = projection.rebuild(db, event_log, fold_fn=fold, reader=reader)
    return db, result


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(rebuild, "READ_CHUNK", 300)  # a few lines a read
    monkeypatch.setattr(rebuild, "REBUILD_BATCH", 4)  # and many batches (2 events read ahead): keys learned across them


def test_a_log_read_ahead_gives_the_projection_of_one_read_in_turn(tmp_path, hostile_log, small_batches):
    serial, serial_result = _rebuilt(tmp_path, hostile_log, "serial", "here")
    ahead, ahead_result = _rebuilt(tmp_path, hostile_log, "ahead", "thread")
    assert rows(ahead) == rows(serial)
    counts = projection.fold_counts(serial)
    assert counts["unknown-signer"] == 4  # bob's start and messages: he never registered
    assert counts["malformed"] == 2 and sum(counts.values()) >= 7  # and mallory's forgery
    assert projection.fold_counts(ahead) == counts
    assert (ahead_result.malformed, ahead_result.refused) == (serial_result.malformed, serial_result.refused)
    texts = {r[0] for r in serial.execute_sql("SELECT body_content FROM messages").fetchall()}
    assert {"a0", "last", "c4"} <= texts and "forged" not in texts and "b0" not in texts
    sessions = {r[0] for r in serial.execute_sql("SELECT session_id FROM sessions").fetchall()}
    assert "ses_alice" in sessions  # started before her registration was read, applied after
    assert database.schema_version(ahead) == database.SCHEMA_VERSION


def test_a_line_held_for_later_makes_the_batches_after_it_judged_with_their_fold(tmp_path, small_batches, monkeypatch):
    """The reader judges batches ahead while nothing is held; a line dated ahead is held in
    the database, and from then on each batch is judged with its fold, which takes the held
    lines come due first, as a rebuild reading in turn does."""
    alice, bob = Agent("alice"), Agent("bob")
    root = tmp_path / "log"
    later = alice.start(timestamp="2099-01-01T00:00:00Z")
    _write(root, "events/000001.jsonl", [alice.register(), bob.register(), later, bob.start()])
    _write(root, "messages/alice/000001.jsonl", [alice.send(f"a{i}") for i in range(9)])
    event_log = EventLog(root)
    ways = []
    judged, called = VerifiedFold.apply_judged, VerifiedFold.__call__

    inside = []  # a fold judging its batch itself applies it the same way

    def spy_judged(self, *a, **kw):
        if not inside:
            ways.append("ahead")
        return judged(self, *a, **kw)

    def spy_called(self, *a, **kw):
        ways.append("with the fold")
        inside.append(1)
        try:
            return called(self, *a, **kw)
        finally:
            inside.pop()

    monkeypatch.setattr(VerifiedFold, "apply_judged", spy_judged)
    monkeypatch.setattr(VerifiedFold, "__call__", spy_called)
    serial, _ = _rebuilt(tmp_path, event_log, "serial", "here")
    assert set(ways) == {"with the fold"}
    ways.clear()
    ahead, _ = _rebuilt(tmp_path, event_log, "ahead", "thread")
    assert ways[0] == "ahead" and ways[-1] == "with the fold" and "ahead" not in ways[ways.index("with the fold") :]
    assert rows(ahead) == rows(serial)
    assert projection.fold_counts(ahead) == projection.fold_counts(serial) == {"future": 1}


def test_progress_is_reported_as_the_batches_come_from_the_reader(tmp_path, hostile_log, small_batches):
    reports = []
    db = database.open_database(tmp_path / "p.db")
    projection.rebuild(db, hostile_log, progress=lambda *r: reports.append(r), reader="thread")
    loads = [r for r in reports if r[0] == "load"]
    total = sum(p.stat().st_size for p in (tmp_path / "log").rglob("*.jsonl"))
    assert len(loads) > 5 and loads[-1][2] == loads[-1][3] == total
    assert [r[1] for r in loads] == sorted(r[1] for r in loads) and loads[-1][1] == 21  # events, in order
    assert [r[0] for r in reports][-2:] == ["indexes", "done"]


def test_a_large_log_is_read_ahead_and_a_small_one_in_turn(tmp_path, hostile_log, monkeypatch):
    started = []
    start = readahead.ReaderThread.start

    def spy(self):
        started.append(self)
        return start(self)

    monkeypatch.setattr(readahead.ReaderThread, "start", spy)
    projection.rebuild(database.open_database(tmp_path / "small.db"), hostile_log)
    assert started == []
    monkeypatch.setattr(rebuild, "READ_AHEAD_BYTES", 100)
    projection.rebuild(database.open_database(tmp_path / "large.db"), hostile_log)
    assert len(started) == 1


def _no_reader_left(before: set[int]) -> bool:
    return {t.ident for t in threading.enumerate()} <= before


def test_an_unreadable_segment_stops_a_rebuild_read_ahead_with_the_reason(tmp_path, hostile_log, small_batches):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    (tmp_path / "log" / "messages/bob/000001.jsonl").chmod(0)
    db = database.open_database(tmp_path / "x.db")
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(readahead.ReaderFailed, match="Permission denied"):
        projection.rebuild(db, hostile_log, reader="thread")
    assert database.schema_version(db) is None  # never taken for a complete projection
    assert _no_reader_left(before)


def test_an_exception_in_the_reader_stops_the_rebuild_with_it(tmp_path, hostile_log, small_batches, monkeypatch):
    read_shard = EventLog.read_shard

    def failing_on_bob(self, shard, pos, result, **kw):  # after some batches were folded
        if shard.startswith("messages/bob/"):
            raise OSError(5, "Input/output error")
        return read_shard(self, shard, pos, result, **kw)

    monkeypatch.setattr(EventLog, "read_shard", failing_on_bob)
    db = database.open_database(tmp_path / "x.db")
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(readahead.ReaderFailed, match="Input/output error"):
        projection.rebuild(db, hostile_log, reader="thread")
    assert database.schema_version(db) is None
    assert _no_reader_left(before)


def test_a_fold_that_fails_stops_the_reader(tmp_path, hostile_log, small_batches):
    db = database.open_database(tmp_path / "x.db")
    before = {t.ident for t in threading.enumerate()}

    def failing(db, records, lines, **kw):
        raise RuntimeError("disk full")

    failing.release = lambda: None
    with pytest.raises(RuntimeError, match="disk full"):
        projection.rebuild(db, hostile_log, fold_fn=failing, reader="thread")
    assert database.schema_version(db) is None
    assert _no_reader_left(before)

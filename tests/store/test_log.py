"""The JSONL log: durable appends, group commit, incremental reads, damage handling."""

from __future__ import annotations

import os

import pytest

from thrum import events as ev
from thrum.store import projection, queries
from thrum.store.log import EventLog, Position, ReadResult

from store_helpers import Events, ids, mid


@pytest.fixture
def e():
    return Events()


def dicts(*records):
    return [d for _, d in records]


def event_ids(result: ReadResult) -> list[str]:
    return [d["event_id"] for _, d in result.records]


def test_append_is_durable_and_readable_after_reopening(tmp_log, e):
    recs = [e.register("alice", "dev"), e.create("alice", "one"), e.read("bob", "msg_x")]
    touched = tmp_log.append(dicts(*recs))
    assert sorted(touched) == ["events/000001.jsonl", "messages/alice/000001.jsonl", "receipts/bob/000001.jsonl"]
    reopened = EventLog(tmp_log.root)
    result = reopened.read_all()
    assert sorted(event_ids(result)) == sorted(d["event_id"] for _, d in recs)
    assert result.issues == []
    assert result.torn == []
    assert reopened.shards() == ["events/000001.jsonl", "messages/alice/000001.jsonl", "receipts/bob/000001.jsonl"]


def test_append_group_commits_a_batch_with_one_fsync_per_shard(tmp_log, e, monkeypatch):
    tmp_log.append(dicts(e.create("alice"), e.create("bob"), e.register("carol", "qa")))  # files exist
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    batch = (
        [e.create("alice", str(i)) for i in range(40)]
        + [e.create("bob", str(i)) for i in range(40)]
        + [e.register(f"a{i}", "qa") for i in range(20)]
    )
    tmp_log.append(dicts(*batch))
    assert len(calls) == 3
    lines = list(tmp_log.iter_lines("messages/alice/000001.jsonl"))
    assert [ev.decode_line(x)["body"]["content"] for x in lines[1:]] == [str(i) for i in range(40)]


def test_read_new_returns_only_lines_after_the_positions(tmp_log, e):
    first = [e.create("alice", "1"), e.register("alice", "dev")]
    tmp_log.append(dicts(*first))
    r1 = tmp_log.read_new({})
    assert len(r1.records) == 2
    second = [e.create("alice", "2"), e.create("bob", "3")]
    tmp_log.append(dicts(*second))
    r2 = tmp_log.read_new(r1.positions)
    assert event_ids(r2) == [d["event_id"] for _, d in second]
    assert tmp_log.read_new(r2.positions).records == []
    assert r2.positions["messages/alice/000001.jsonl"] == tmp_log.end_position("messages/alice/000001.jsonl")


def test_torn_last_line_is_reported_skipped_and_later_kept_separate(db, tmp_log, e):
    c = e.create("alice", "kept")
    tmp_log.append(dicts(c))
    path = tmp_log.root / "messages" / "alice" / "000001.jsonl"
    torn = ev.encode_line(e.create("alice", "torn")[1])[:40]
    with open(path, "ab") as f:
        f.write(torn)  # crash mid-write
    result = tmp_log.read_all()
    assert event_ids(result) == [c[1]["event_id"]]
    assert len(result.torn) == 1
    assert result.torn[0].line == torn
    assert result.issues == []
    assert path.read_bytes().endswith(torn)  # never deleted
    later = e.create("alice", "after the crash")
    EventLog(tmp_log.root).append(dicts(later))  # a fresh EventLog must notice the torn end
    result = tmp_log.read_all()
    assert event_ids(result) == [c[1]["event_id"], later[1]["event_id"]]
    assert len(result.issues) == 1
    assert result.issues[0].line == torn
    assert result.torn == []
    projection.catch_up(db, tmp_log)
    assert sorted(ids(queries.list_messages(db))) == sorted([mid(c), mid(later)])


def test_malformed_lines_are_reported_and_the_rest_projects(db, tmp_log, e):
    good = [e.create("alice", str(i)) for i in range(3)]
    tmp_log.append(dicts(good[0]))
    path = tmp_log.root / "messages" / "alice" / "000001.jsonl"
    with open(path, "ab") as f:
        f.write(b"garbage\n\n" + b'{"type":"message.create"}\n')
    tmp_log.append(dicts(*good[1:]))
    result = tmp_log.read_all()
    assert len(result.records) == 3
    assert len(result.issues) == 2
    assert "not JSON" in result.issues[0].reason
    assert "event_id" in result.issues[1].reason
    folded = projection.catch_up(db, tmp_log)
    assert folded.malformed == 2
    assert len(folded.applied) == 3
    assert len(queries.list_messages(db)["messages"]) == 3
    assert path.read_bytes().count(b"garbage") == 1


def test_replaced_shard_invalidates_its_position(tmp_log, e):
    tmp_log.append(dicts(e.create("alice", "a"), e.create("alice", "b")))
    positions = tmp_log.read_all().positions
    path = tmp_log.root / "messages" / "alice" / "000001.jsonl"
    # a sync merge rewrote the file: other lines, the old position now points mid-file
    merged = [e.create("alice", "remote 1"), e.create("alice", "remote 2"), e.create("alice", "c")]
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(b"".join(ev.encode_line(d) for d in dicts(*merged)))
    os.replace(tmp, path)
    tmp_log.forget_cached_state()
    result = tmp_log.read_new(positions)
    assert event_ids(result) == [d["event_id"] for d in dicts(*merged)]


def test_replaced_shard_with_same_length_is_still_detected(tmp_log, e):
    a = e.create("alice", "aaaa")
    tmp_log.append(dicts(a))
    positions = tmp_log.read_all().positions
    path = tmp_log.root / "messages" / "alice" / "000001.jsonl"
    b = e.create("alice", "bbbb")  # same length line, different event
    path.write_bytes(ev.encode_line(b[1]))
    assert path.stat().st_size == positions["messages/alice/000001.jsonl"].offset
    assert event_ids(tmp_log.read_new(positions)) == [b[1]["event_id"]]


def test_stale_position_beyond_the_end_rereads(tmp_log, e):
    tmp_log.append(dicts(e.create("alice")))
    assert len(tmp_log.read_new({"messages/alice/000001.jsonl": Position(10**6, "x")}).records) == 1


def test_read_shard_in_chunks_gives_the_same_records(tmp_log, e):
    tmp_log.append(dicts(*[e.create("alice", "x" * (i * 37 % 500)) for i in range(60)]))
    whole = ReadResult()
    assert tmp_log.read_shard("messages/alice/000001.jsonl", Position(), whole) is True
    pos, parts, rounds = Position(), ReadResult(), 0
    while True:
        rounds += 1
        done = tmp_log.read_shard("messages/alice/000001.jsonl", pos, parts, max_bytes=700)
        pos = parts.positions["messages/alice/000001.jsonl"]
        if done:
            break
    assert rounds > 10
    assert event_ids(parts) == event_ids(whole)
    assert parts.torn == []
    assert pos == whole.positions["messages/alice/000001.jsonl"]


def test_shard_paths_refuse_traversal(tmp_log):
    for bad in (
        "../outside.jsonl",
        "messages/../../outside.jsonl",
        "messages/.hidden/000001.jsonl",
        "/etc/passwd",
        "receipts/a/b.jsonl",
        "events/000001.jsonl/../x",
    ):
        with pytest.raises(ValueError):
            tmp_log.path(bad)


def test_symlinks_in_the_worktree_are_neither_read_nor_written(tmp_path, tmp_log, e):
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(ev.encode_line(e.create("mallory")[1]))
    outside_dir = tmp_path / "outside-dir"
    outside_dir.mkdir()
    (tmp_log.root / "messages" / "mallory").mkdir(parents=True)
    os.symlink(outside, tmp_log.root / "messages" / "mallory" / "000001.jsonl")
    os.symlink(outside_dir, tmp_log.root / "messages" / "eve")  # a linked stream directory
    (tmp_log.root / "messages" / "notes.txt").write_text("ignored")
    assert tmp_log.shards() == []
    assert tmp_log.read_all().records == []
    with pytest.raises(OSError):
        tmp_log.append(dicts(e.create("mallory")))
    with pytest.raises(OSError):
        tmp_log.append(dicts(e.create("eve")))
    assert outside.read_bytes().count(b"\n") == 1
    assert list(outside_dir.iterdir()) == []


def test_a_stream_rolls_over_to_a_new_segment_at_the_cap(tmp_path, e):
    log_ = EventLog(tmp_path / "log", segment_cap=2000)
    lines = [ev.encode_line(d) for d in dicts(*[e.create("alice", "x" * 200) for _ in range(30)])]
    for i in range(0, 30, 4):  # several batches, as the writer appends them
        log_.append([ev.decode_line(x) for x in lines[i : i + 4]])
    segments = log_.shards()
    assert len(segments) > 3 and segments == sorted(segments)
    sizes = [(tmp_path / "log" / s).stat().st_size for s in segments]
    assert all(size <= 2000 for size in sizes)
    assert b"".join((tmp_path / "log" / s).read_bytes() for s in segments) == b"".join(lines)  # in order, once
    big = e.create("alice", "y" * 5000)
    touched = log_.append(dicts(big))
    assert touched == [ev.segment_path("messages/alice", len(segments) + 1)]  # a long line gets its own segment
    after = e.create("alice", "z")
    assert log_.append(dicts(after)) == [ev.segment_path("messages/alice", len(segments) + 2)]
    assert EventLog(tmp_path / "log", segment_cap=2000).append(dicts(e.create("alice", "w"))) == [
        ev.segment_path("messages/alice", len(segments) + 2)
    ]  # a fresh log finds the highest segment


def test_append_lines_adds_to_the_named_segment_without_rolling_over(tmp_path, e):
    log_ = EventLog(tmp_path / "log", segment_cap=1000)
    log_.append(dicts(*[e.create("alice", "x" * 300) for _ in range(6)]))
    first = "messages/alice/000001.jsonl"
    before = (tmp_path / "log" / first).read_bytes()
    log_.append_lines(first, [b'{"type":"seal","n":1}', b'{"type":"seal","n":2}\n'])
    assert (tmp_path / "log" / first).read_bytes() == before + b'{"type":"seal","n":1}\n{"type":"seal","n":2}\n'
    with pytest.raises(ValueError):
        log_.append_lines(first, [b"two\nlines"])
    with pytest.raises(ValueError):
        log_.append_lines("messages/alice.jsonl", [b"{}"])

"""Reading the log after a point for a resume: in event_id order, in bounded pieces,
opening only the segments that can hold something new."""

from __future__ import annotations

import json
import os
import tracemalloc

from thrum.store.backlog import BacklogReader, SegmentIndex, events_after
from thrum.store.log import EventLog

from store_helpers import Events

ALL = frozenset({"message.create", "message.read", "agent.register"})


def _log(tmp_path, cap: int = 2048) -> EventLog:
    root = tmp_path / "log"
    root.mkdir()
    return EventLog(root, segment_cap=cap)


def _history(event_log: EventLog, e: Events, n: int, agents=("alice", "bob", "carol")) -> list[str]:
    """``n`` messages spread over a few agents' streams, appended in time order; their ids."""
    made = [e.create(agents[i % len(agents)], f"message {i} " + "x" * 40) for i in range(n)]
    event_log.append([d for _, d in made])
    return [d["event_id"] for _, d in made]


def _all_after(event_log, index, since, limit) -> tuple[list[str], int]:
    """Follow the pieces to the end, as the hub does; every id and how many pieces."""
    got, pieces = [], 0
    while True:
        piece, more = events_after(event_log, index, since, ALL, limit)
        pieces += 1
        got += [d["event_id"] for d in piece]
        if not more:
            return got, pieces
        since = piece[-1]["event_id"]


def test_pieces_follow_each_other_in_event_id_order_with_nothing_lost_or_repeated(tmp_path):
    event_log, e = _log(tmp_path), Events()
    ids = _history(event_log, e, 300)
    late = e.create("dave", "from a machine that was offline", ts="2026-01-01T00:00:00.000Z")
    late_d = dict(late[1], event_id=ids[100][:-1] + "Z")  # an old id arriving now, in a new stream
    event_log.append([late_d])
    expected = sorted(ids[49:] + [late_d["event_id"]])[1:]  # everything after ids[49]
    got, pieces = _all_after(event_log, SegmentIndex(), ids[49], limit=40)
    assert got == expected
    assert pieces == -(-len(expected) // 40)


def test_a_recent_point_opens_only_the_newest_segments(tmp_path):
    event_log, e = _log(tmp_path), Events()
    ids = _history(event_log, e, 600)
    segments = len(event_log.shards())
    assert segments > 30
    index = SegmentIndex()
    got, _ = _all_after(event_log, index, ids[0], limit=10_000)  # the first resume learns every segment
    assert got == ids[1:]
    assert index.files_read == segments
    index.files_read = 0
    got, _ = _all_after(event_log, index, ids[-5], limit=10_000)
    assert got == ids[-4:]
    assert index.files_read <= 3  # the last segment of each stream, not the history


def test_a_segment_replaced_or_grown_underneath_is_read_again(tmp_path):
    event_log, e = _log(tmp_path), Events()
    ids = _history(event_log, e, 60)
    index = SegmentIndex()
    assert _all_after(event_log, index, ids[-1], 100)[0] == []
    more = _history(event_log, e, 3)  # appends grow the newest segments
    assert _all_after(event_log, index, ids[-1], 100)[0] == more
    # a sync merge replaces a file whole: an event lands in an old segment
    old_segment = event_log.shards()[1]
    path = event_log.root / old_segment
    merged = e.create("alice", "merged in")[1]
    data = path.read_bytes() + (json.dumps(merged, separators=(",", ":")) + "\n").encode()
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    assert _all_after(event_log, index, more[-1], 100)[0] == [merged["event_id"]]


def test_memory_stays_bounded_by_the_piece_not_the_history(tmp_path):
    """The hub once read the whole log for every resume from beyond its ring; a slow
    subscriber resumes again and again, so that cost was paid over and over."""
    event_log, e = _log(tmp_path, cap=64 * 1024), Events()
    ids = _history(event_log, e, 20_000)
    index = SegmentIndex()
    events_after(event_log, index, ids[-1], ALL, 100)  # learn the segments once

    tracemalloc.start()
    try:
        for since in (ids[0], ids[5_000], ids[10_000]):  # three resumes from far back
            tracemalloc.reset_peak()
            events_after(event_log, index, since, ALL, 100)
            piece_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        event_log.read_all()
        whole_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert piece_peak * 10 < whole_peak, (piece_peak, whole_peak)


def test_text_that_looks_like_an_older_id_never_hides_a_newer_event(tmp_path):
    """Lines are skipped by the ids their bytes show; a line quoting an old id in its
    body, nesting one, or written with other spacing must still be found."""
    event_log, e = _log(tmp_path), Events()
    ids = _history(event_log, e, 5)
    old = ids[0]
    quoting = e.create("alice", f'see "event_id":"{old}"')[1]  # escaped inside the string
    nested = dict(e.create("alice", "nested")[1])
    nested = {"x": {"event_id": old}, **nested}  # an unknown field first, with an old id in it
    spaced = e.create("alice", "spaced")[1]
    lines = [
        json.dumps(quoting, separators=(",", ":")),
        json.dumps(nested, separators=(",", ":")),
        json.dumps(spaced),  # ", " and ": " separators
    ]
    event_log.append_lines("messages/alice/000009.jsonl", [(line + "\n").encode() for line in lines])
    got, _ = _all_after(event_log, SegmentIndex(), ids[-1], 100)
    assert got == [quoting["event_id"], nested["event_id"], spaced["event_id"]]


def test_a_reader_scans_once_per_window_and_its_last_piece_comes_from_a_fresh_scan(tmp_path):
    """A resume scans the files about once per window of events, not once per piece;
    events appended during the walk are handed out too, and the piece that says it is
    the last (``skip_above`` None) was read after everything before it was handed out."""
    event_log, e = _log(tmp_path), Events()
    ids = _history(event_log, e, 200)
    reader = BacklogReader(event_log, SegmentIndex(), ids[9], ALL, piece=10, window=50)
    got, appended = [], []
    while True:
        piece, skip_above = reader.next_piece()
        got += [d["event_id"] for d in piece]
        if len(got) == 100:  # meanwhile the agents go on writing
            appended = _history(event_log, e, 15)
        if skip_above is None:
            break
        assert all(eid <= skip_above for eid in got)
    assert got == ids[10:] + appended
    assert reader.scans <= 7  # 205 events in windows of 50, not 21 pieces' worth of scans

"""The rebuild progress line `thrum init` keeps on a terminal (thrum.cli.progress)."""

from __future__ import annotations

import io
from types import SimpleNamespace

from thrum.cli.progress import RebuildProgress, describe, rebuild_progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_gives_events_share_rate_and_time_left():
    line = describe({"phase": "load", "events": 250_000, "bytes": 25, "total_bytes": 100, "elapsed": 10.0})
    # 10 s for a quarter: 30 s more to load, then the indexes (half the load's 40 s)
    assert line == "thrum: building the projection: 250,000 events (25%), 25,000 events/s, about 50 s left"
    line = describe({"phase": "load", "events": 10_000, "bytes": 1, "total_bytes": 100, "elapsed": 2.0})
    assert line is not None and line.endswith("about 4 min 58 s left")
    line = describe({"phase": "load", "events": 10_000, "bytes": 100, "total_bytes": 100, "elapsed": 60.0})
    assert line is not None and line.endswith("about 30 s left")  # read to the end: the indexes remain
    assert describe({"phase": "indexes", "events": 1_000, "elapsed": 75.0}) == (
        "thrum: building the projection: 1,000 events read; building its indexes (1 min 15 s in)"
    )
    assert describe({"phase": "done", "events": 1_000, "elapsed": 0.5}) == (
        "thrum: projection built: 1,000 events in 0 s (2,000 events/s)"
    )


def test_a_report_it_cannot_read_is_left_out():
    for report in (
        {},
        {"phase": "load"},
        {"phase": "load", "events": "many", "elapsed": 1},
        {"phase": "x", "events": 1, "elapsed": 1},
    ):
        assert describe(report) is None


def test_one_line_rewritten_in_place_then_ended():
    term = Terminal()
    show = RebuildProgress(term)
    show({"phase": "load", "events": 5, "bytes": 1, "total_bytes": 2, "elapsed": 1})
    show({"phase": "garbage"})
    show({"phase": "done", "events": 10, "elapsed": 2})
    assert term.getvalue().count("\r\x1b[K") == 2 and term.getvalue().endswith("events/s)\n")


def test_only_on_a_terminal_and_never_under_quiet_or_json():
    loud = SimpleNamespace(quiet=False, json=False)
    assert rebuild_progress(loud, Terminal()) is not None
    assert rebuild_progress(loud, io.StringIO()) is None  # a pipe or a file
    assert rebuild_progress(SimpleNamespace(quiet=True, json=False), Terminal()) is None
    assert rebuild_progress(SimpleNamespace(quiet=False, json=True), Terminal()) is None


def test_the_fetch_and_the_checkout_have_their_lines_before_the_rebuild():
    assert describe({"phase": "fetch", "remote": "origin"}) == "thrum: fetching the team's log from origin…"
    assert describe({"phase": "checkout", "files": 11_470, "done": 5_120, "elapsed": 1.5}) == (
        "thrum: checking out the log: 5,120 of 11,470 files"
    )
    assert (
        describe({"phase": "checkout", "files": 3, "done": 9, "elapsed": 0})
        == "thrum: checking out the log: 3 of 3 files"
    )
    assert describe({"phase": "checkout", "files": "many", "done": 1}) is None
    assert describe({"phase": "fetch"}) is None


def test_a_line_left_open_is_cleared_before_what_follows():
    term = Terminal()
    show = RebuildProgress(term)
    show.finish()
    assert term.getvalue() == ""  # nothing shown: nothing to clear
    show({"phase": "checkout", "files": 2, "done": 2, "elapsed": 0.1})
    show.finish()
    assert term.getvalue().endswith("files\r\x1b[K")
    show({"phase": "done", "events": 10, "elapsed": 2})
    shown = term.getvalue()
    show.finish()
    assert term.getvalue() == shown  # the rebuild's last line ends with its newline

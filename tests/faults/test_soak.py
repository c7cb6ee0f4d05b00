"""A short soak (issue 15): a minute of honest load, syncs and abuse, checked end to end.

The full run is ``scripts/bench.py soak --minutes 10`` (figures in BENCHMARKS.md);
this one runs in ``scripts/test`` by default and can be deselected with
``-m "not soak"``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import bench_soak  # noqa: E402

pytestmark = pytest.mark.soak


def test_a_minute_of_load_syncs_and_abuse_loses_nothing_and_leaks_nothing():
    r = bench_soak.run(1.0, think_ms=30.0)
    assert r["errors"] == {}, r["error_examples"]
    assert r["sends"] > 500
    assert r["logs_identical"]
    for name in ("a", "b"):
        assert r["exactly_once"][name]["missing_or_duplicated"] == 0, r["exactly_once"]
        assert r["exactly_once"][name]["extra"] == 0, r["exactly_once"]
        assert r["visible"][name] == r["sends"]
    assert r["abuse"], "the abusive client never got going"
    end = r["samples"][-1]
    assert end["fds_a"] - r["baseline"]["fds_a"] < 40, r["samples"]  # every abusive socket was let go
    assert max(s["rss_a"] for s in r["samples"]) < 400, r["samples"]  # no runaway buffer (GBs before)
    assert r["notes"].get("ws_message_create", 0) > 0 and r["notes"].get("waiter_woken", 0) > 0

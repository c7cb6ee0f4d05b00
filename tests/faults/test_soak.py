"""A short soak (issue 15): a minute of honest load, syncs and abuse, checked end to end,
including the MCP waiter (a real ``thrum mcp serve``) and WebSocket subscribers that
resume after the daemon drops notifications for them.

The full run is ``scripts/bench.py soak --minutes 10`` (figures in BENCHMARKS.md);
this one runs from ``scripts/soak`` (the default suite leaves it out:
``-m "not soak"`` in pyproject.toml).
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
    # WebSocket subscribers: the slow one was told of drops, resumed, and every subscriber has every message
    subs = r["subscribers"]
    assert subs[0]["dropped"] > 0 and subs[0]["resumes"] > 0, subs
    for sub in subs:
        assert sub["unresumable"] == 0, subs
        assert sub["twice"] == 0, subs
        assert sub["unexpected"] == 0, subs
    # every subscriber ends with every message, the slow one included: it resumed after each
    # drop and its last resume completed before the end
    for sub in subs:
        assert sub["lost_after_resume"] == 0, subs
        assert not sub["ended_resuming"], subs
    # the MCP waiter (a real `thrum mcp serve`) and the CLI waiter: every message for them exactly once
    for who, w in r["waiters"].items():
        assert w["expected"] > 20, (who, w)
        assert (w["missing"], w["duplicated"], w["unexpected"]) == (0, 0, 0), (who, w)
    mcp = r["waiters"]["waiter"]
    assert mcp["by_wait"] > mcp["expected"] // 2, mcp  # woken by wait_for_message, not just found by checks
    assert r["latency_ms"]["wake:waiter"]["n"] > 0

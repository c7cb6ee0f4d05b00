"""How often local writes start a sync cycle: one debounce after a write that follows a
quiet spell, and during a burst of writes at most once per five debounces,
so that sustained sends do not pay for a commit every fifth of a second."""

from __future__ import annotations

import time

from fixtures.waiting import until
from thrum import lifecycle

from daemon_helpers import RawClient

DEBOUNCE = 0.2
SPACING = 1.0  # five debounces (thrum.daemon.pace.BURST_DEBOUNCES)


def _cycles(c: RawClient) -> int:
    return int(c.request("sync.status")["result"]["cycles"])


def test_a_burst_of_sends_starts_a_cycle_at_most_once_per_five_debounces(repo, monkeypatch):
    monkeypatch.setenv("THRUM_LOCAL", "1")
    monkeypatch.setenv("THRUM_WS_PORT", "0")
    monkeypatch.setenv("THRUM_SYNC_DEBOUNCE", str(DEBOUNCE))
    monkeypatch.setenv("THRUM_PRESENCE_INTERVAL", "0")  # heartbeats are writes too
    paths = lifecycle.init_repo(repo)
    c = RawClient(paths)
    try:
        assert "result" in c.request("agent.register", {"name": "alice", "role": "implementer"})
        before = until(lambda: _cycles(c), "the registration's own cycle")
        # a write after a quiet spell is committed one debounce later
        c.request("message.send", {"caller": "alice", "content": "first", "to": ["@implementer"]})
        started = until(lambda: (n := _cycles(c)) > before and n, "a cycle after the first send")

        t0 = time.monotonic()
        sent = 0
        while time.monotonic() - t0 < 2.5:
            reply = c.request("message.send", {"caller": "alice", "content": f"burst {sent}", "to": ["@implementer"]})
            assert "result" in reply, reply
            sent += 1
        burst = time.monotonic() - t0
        # the last cycle the burst asked for commits what is left
        until(lambda: c.request("sync.status")["result"]["pending_events"] == 0, "the burst committed")
        cycles = _cycles(c) - started
        assert sent > 20
        # one cycle per debounce would be ~12 here; the spacing allows ~3 (plus the one at the end)
        assert 1 <= cycles <= burst / SPACING + 2, (cycles, burst, sent)
    finally:
        c.close()
        lifecycle.stop(paths)

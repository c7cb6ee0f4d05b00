"""Presence that is true everywhere (issue 30, item 5).

Before: presence was this daemon's memory of calls. On B, alice (working on A) was
``offline`` with no last seen in MCP's ``list_agents``, ``recipient_status`` said
offline, a broadcast to active agents found nobody, and at the same moment
``thrum agent list`` said ``active`` (an open session) with LAST SEEN ``-``.

Now an agent's last seen is its newest event in the log (thrum.presence), and an
agent that is around but writes nothing gets an ``agent.heartbeat`` at most every
``presence_interval`` (thrum.daemon.presence), which the daemons' own syncs carry:
two real replicas through a bare remote, no ``thrum sync`` run by hand once the
machines know each other. The CLI, the RPC and MCP give one answer.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import trio

from test_replication import _introduce

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "mcp"))

from mcp_helpers import mcp_server  # noqa: E402


def _until(predicate, deadline_s: float = 60.0, every_s: float = 0.1):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = predicate()
        if found:
            return found
        time.sleep(every_s)
    raise AssertionError(f"not within {deadline_s}s")


def _heartbeats(machine, agent: str) -> list[dict]:
    """The agent.heartbeat events of ``agent`` in the machine's log (its receipts stream)."""
    out = []
    for path in sorted((machine.worktree / "receipts" / agent).glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            d = json.loads(line)
            if d.get("type") == "agent.heartbeat":
                out.append(d)
    return out


def _agent(machine, name: str) -> dict:
    return machine.rpc("agent.get", {"name": name})["agent"]


def test_an_agent_around_on_a_is_active_on_b_by_the_daemons_own_syncs(machines):
    # presence every second; the idle looks every 2 s: B must be right within one of them
    a, b = machines(2, THRUM_PRESENCE_INTERVAL="1", THRUM_SYNC_INTERVAL="2", THRUM_SYNC_DEBOUNCE="0.1")
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    _introduce(a, b)
    before = _agent(b, "alice")["last_seen_at"]

    # alice only reads on A (no event of her own): her daemon sees her and writes a heartbeat
    beat = _until(
        lambda: a.run("inbox", agent="alice") and [h for h in _heartbeats(a, "alice") if h["timestamp"] > before]
    )[-1]
    assert beat["sig"]["by"] == "alice" and beat["chain"]["seq"] >= 1  # signed and chained like every event

    # B learns it from the log by its own syncs, within one look (nobody runs `thrum sync`)
    _until(lambda: _agent(b, "alice")["last_seen_at"] >= beat["timestamp"], deadline_s=30)
    on_b = _agent(b, "alice")
    assert on_b["status"] == "active"

    # one answer: the RPC's list, the CLI's (`thrum agent list`) and MCP's tools
    listed = {x["name"]: x for x in b.rpc("agent.list")["agents"]}
    cli = {x["name"]: x for x in b.json("agent", "list")["agents"]}
    assert cli["alice"]["status"] == listed["alice"]["status"] == "active"
    assert cli["alice"]["last_seen_at"] == listed["alice"]["last_seen_at"] != ""
    table = b.run("agent", "list").stdout
    row = next(line for line in table.splitlines() if line.startswith("@alice"))
    assert "active" in row and not row.rstrip().endswith("-"), row

    async def mcp() -> None:
        async with mcp_server(b.path, "bob") as bob:
            agents = {x["name"]: x for x in (await bob.call("list_agents"))["agents"]}
            assert agents["alice"]["status"] == "active"
            assert agents["alice"]["last_seen_at"] == listed["alice"]["last_seen_at"]
            sent = await bob.call("send_message", {"to": "@alice", "content": "are you there?"})
            assert sent["recipient_status"] == "active"
            cast = await bob.call("broadcast_message", {"content": "standup", "filter": {"status": "active"}})
            assert "alice" in cast["sent_to"], cast

    trio.run(mcp)


def _for(seconds: float, call, every_s: float = 0.2) -> None:
    """``call()`` every ``every_s`` for ``seconds``: an agent around for that long."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        call()
        time.sleep(every_s)


INTERVAL = 2.0  # presence_interval of the next test: every phase lasts a few of them


def test_heartbeats_only_while_an_agent_is_seen_and_writes_nothing_else(machines):
    (a,) = machines(1, THRUM_PRESENCE_INTERVAL=str(INTERVAL), THRUM_SYNC_DEBOUNCE="0.1")
    a.agent("alice", "implementer")
    a.agent("bob", "reviewer")
    proxy = "gcr_aaaaaaaa_gc_mayor"  # a Gas City mailbox's agent on this machine (thrum.gcmail.addresses)
    a.rpc("agent.register", {"name": proxy, "role": "gc", "module": "gc_mayor"})
    # writing keeps alice present: a message every moment for longer than an interval, and no heartbeat
    # (her quickstart may have made one due before her first message: agent.get writes it now)
    send = lambda: a.rpc("message.send", {"caller": "alice", "content": "still here", "to": ["@bob"]})  # noqa: E731
    send()
    a.rpc("agent.get", {"name": "alice"})
    earlier = len(_heartbeats(a, "alice"))
    assert earlier <= 1
    _for(1.75 * INTERVAL, send)
    assert len(_heartbeats(a, "alice")) == earlier
    # reading only: heartbeats, one per interval at most, while she is seen
    started = time.monotonic()

    def reading() -> list[dict]:
        a.rpc("message.counts", {"caller": "alice"})
        a.rpc("message.counts", {"caller": proxy})
        beats = _heartbeats(a, "alice")[earlier:]
        return beats if len(beats) >= 2 else []

    _until(reading, deadline_s=60, every_s=0.2)
    beats = _heartbeats(a, "alice")[earlier:]
    assert _heartbeats(a, proxy) == []  # the provider's plumbing, not an agent anyone waits for
    assert len(beats) <= 1 + (time.monotonic() - started) / (INTERVAL - 0.3), beats
    # a page that only watches (observe: true) sees nobody: no more heartbeats for her
    a.rpc("agent.get", {"name": "alice"})  # writes the heartbeats her last calls made due, if any
    count = len(_heartbeats(a, "alice"))
    _for(1.25 * INTERVAL, lambda: a.rpc("message.counts", {"caller": "alice", "observe": True}))
    assert len(_heartbeats(a, "alice")) == count
    assert len(_heartbeats(a, "bob")) <= 1  # seen by his quickstart, never since

"""Conversations at seconds across machines (issue 30): a replica with recent activity
looks at the remote's tip often and fetches only when it moved; an idle one looks at
the configured interval, and a look that finds nothing runs no cycle."""

from __future__ import annotations

from fixtures.waiting import until
from test_replication import _introduce


def _until(predicate):
    return until(predicate, "the other machine", every=0.1)


def _contents(machine, agent: str) -> set[str]:
    return {m["body"]["content"] for m in machine.rpc("message.list", {"caller": agent, "page_size": 100})["messages"]}


def test_a_conversation_crosses_machines_without_waiting_for_the_idle_interval(machines):
    # the idle interval is an hour: only the active pace can carry these messages
    a, b = machines(2, THRUM_SYNC_INTERVAL="3600", THRUM_SYNC_DEBOUNCE="0.1", THRUM_SYNC_ACTIVE_INTERVAL="0.2")
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    _introduce(a, b)
    # a message sent or received makes a replica active (registrations and receipts do not)
    a.run("send", "starting on the parser", "--to", "@bob", agent="alice")
    b.run("sync")  # the first message of a conversation reaches an idle replica at its idle pace
    b.run("send", "is the parser done?", "--to", "@alice", agent="bob")
    _until(lambda: "is the parser done?" in _contents(a, "alice"))
    a.run("send", "yes, merged", "--to", "@bob", agent="alice")
    _until(lambda: "yes, merged" in _contents(b, "bob"))
    pace = a.rpc("sync.status")["pace"]
    assert pace["state"] == "active" and pace["tip_checks"] >= 1 and pace["requests_last_hour"] >= pace["tip_checks"]


def test_an_idle_replica_only_looks_at_the_tip_until_it_moves(machines):
    # presence off: the agents' first heartbeats (a write each, so a cycle) would race the count
    a, b = machines(
        2,
        THRUM_SYNC_INTERVAL="0.3",
        THRUM_SYNC_DEBOUNCE="0.1",
        THRUM_SYNC_ACTIVE_WINDOW="0",
        THRUM_PRESENCE_INTERVAL="0",
    )
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    _introduce(a, b)
    first = a.rpc("sync.status")
    assert first["pace"]["state"] == "idle"
    later = _until(lambda: (s := a.rpc("sync.status"))["pace"]["tip_checks"] >= first["pace"]["tip_checks"] + 3 and s)
    assert later["cycles"] == first["cycles"]  # nothing moved: no fetch, no cycle
    b.run("send", "ping", "--to", "@alice", agent="bob")
    _until(lambda: "ping" in _contents(a, "alice"))
    assert a.rpc("sync.status")["cycles"] > first["cycles"]

"""An address registered on another machine after our last sync (issue 9, item 9):
the daemon fetches and merges once before calling it unknown."""

from __future__ import annotations

import json


def test_an_agent_registered_elsewhere_since_the_last_sync_is_found_by_one_fetch(machines):
    a, b = machines(2)
    a.agent("alice", "implementer")
    a.sync()
    b.sync()
    b.agent("bob", "reviewer")
    b.sync()  # bob is on the remote; a has not synced since (30 s timers, cron: the common case)
    sent = a.json("send", "Welcome aboard", "--to", "@bob", agent="alice")
    assert sent["recipients"] == [{"address": "@bob", "kind": "agent"}]
    a.sync()
    b.sync()
    assert [m["message_id"] for m in b.json("inbox", "--mentions", agent="bob")["messages"]] == [sent["message_id"]]


def test_a_still_unknown_address_says_when_the_last_sync_succeeded(machines):
    [a] = machines(1)
    a.agent("alice", "implementer")
    a.sync()
    r = a.run("send", "anyone there?", "--to", "@nobody", agent="alice", check=False)
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "unknown recipient" in r.stderr and "checked the remote just now" in r.stderr
    assert "last successful sync: 20" in r.stderr and "s ago)" in r.stderr
    err = a.run("send", "anyone there?", "--to", "@nobody", "--json", agent="alice", check=False)
    data = json.loads(err.stdout)["error"]["data"]
    assert data["last_sync"].startswith("20") and data["sync_checked"] is True

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
    r = a.run("send", "anyone there?", "--to", "@alicia", agent="alice", check=False)
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "unknown recipient" in r.stderr and "checked the remote just now" in r.stderr
    assert "last successful sync: 20" in r.stderr and "s ago)" in r.stderr
    assert "did you mean @alice?" in r.stderr
    err = a.run("send", "anyone there?", "--to", "@alicia", "--json", agent="alice", check=False)
    data = json.loads(err.stdout)["error"]["data"]
    assert data["last_sync"].startswith("20") and data["sync_checked"] is True


def test_a_role_nobody_holds_yet_is_looked_for_on_the_remote_then_waits_for_its_holder(machines):
    """The README's two machines: `send --to @reviewer && thrum sync` on A before anyone
    is a reviewer; bob registers as reviewer on B and finds the message."""
    a, b = machines(2)
    a.agent("alice", "implementer", "api")
    sent = a.run("send", "API ready", "--to", "@reviewer", agent="alice")
    assert "nobody holds the role @reviewer yet" in sent.stderr
    assert a.sync()["pushed"]
    b.agent("bob", "reviewer", "api")
    b.sync()
    inbox = b.json("inbox", "--mentions", agent="bob")["messages"]
    assert [m["body"]["content"] for m in inbox] == ["API ready"]


def test_a_role_held_on_another_machine_is_found_by_the_fetch_not_taken_as_pending(machines):
    a, b = machines(2)
    a.agent("alice", "implementer")
    a.sync()
    b.agent("bob", "reviewer")
    b.sync()  # a has not synced since: the role is unknown on a
    sent = a.json("send", "Please review", "--to", "@reviewer", agent="alice")
    if "note" in sent:  # only when the fetch outlived its bound (a loaded machine), and then it says so
        assert "the fetch from the remote did not finish in time" in sent["note"], sent["note"]
    else:
        assert sent["recipients"] == [{"address": "@reviewer", "kind": "role"}]
    a.sync()
    b.sync()
    assert [m["message_id"] for m in b.json("inbox", "--mentions", agent="bob")["messages"]] == [sent["message_id"]]

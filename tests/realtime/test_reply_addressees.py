"""A reply inherits its parent's addressees unless it names its own (issue 30, item 10):
a follow-up to "PR ready -> @reviewer" reaches the reviewers."""

from __future__ import annotations

from realtime_helpers import start_daemon


def _mentioning(d, agent: str) -> list[str]:
    got = d.call("message.list", {"caller": agent, "mentions": True, "page_size": 50})
    return [m["body"]["content"] for m in got["messages"]]


def test_a_follow_up_to_ones_own_message_reaches_its_addressees(tmp_path):
    d = start_daemon(tmp_path)
    try:
        d.register("alice", "implementer")
        d.register("bob", "reviewer")
        d.register("carol", "tester")
        first = d.send("alice", "PR ready", mentions=["@reviewer"])
        follow = d.send("alice", "fixed the nits", reply_to=first["message_id"])
        assert [r["address"] for r in follow["recipients"]] == ["@reviewer"]
        assert "fixed the nits" in _mentioning(d, "bob")
        # bob's answer goes to alice (the author) and to the parent's addressees
        answer = d.send("bob", "approved", reply_to=follow["message_id"])
        assert "approved" in _mentioning(d, "alice")
        assert {r["address"] for r in answer["recipients"]} >= {"@alice"}
        # naming addressees replaces the inherited ones
        own = d.send("alice", "carol, please test", reply_to=first["message_id"], mentions=["@carol"])
        assert [r["address"] for r in own["recipients"]] == ["@carol"]
        assert "carol, please test" not in _mentioning(d, "bob")
    finally:
        d.stop()

"""A role nobody holds yet is an address (issue 30, item 1): the README's own first send.

The message waits for the role's first holder, who finds it in `inbox --mentions`;
the sender gets one line saying nobody holds the role yet. A slip for a known
name stays refused with suggestions.
"""

from __future__ import annotations

import re

MSG_ID = re.compile(r"msg_[0-9A-Z]{26}")


def test_a_role_nobody_holds_yet_waits_for_its_first_holder(fresh):
    fresh.init()
    fresh.agent("alice", "implementer", "auth")
    r = fresh.run(
        "send", "Auth module complete", "--to", "@reviewer", "--scope", "module:auth", "--ref", "issue:beads-42"
    )
    assert r.code == 0, r.err
    mid = MSG_ID.search(r.out).group()
    assert r.out == f"> Message sent: {mid}\n  To: @reviewer (role)\n"
    assert r.err == "thrum: note: nobody holds the role @reviewer yet; the message waits for its first holder\n"

    fresh.agent("bob", "reviewer", "auth")
    mentions = fresh.ok("inbox", "--mentions", "--unread", "--json", agent="bob").json()
    assert [m["message_id"] for m in mentions["messages"]] == [mid]
    assert fresh.ok("inbox", "--count", "--json", agent="bob").json() == {"total": 1, "unread": 1}
    woken = fresh.ok("wait", "--mentions", "--timeout", "0", "--json", agent="bob").json()
    assert [m["message_id"] for m in woken["messages"]] == [mid]


def test_the_note_is_in_the_json_answer_and_quiet_silences_it(fresh):
    fresh.init()
    fresh.agent("alice", "implementer")
    sent = fresh.ok("send", "anyone?", "--to", "@tester", "--to", "@alice", "--json", agent="alice")
    assert sent.err == ""
    data = sent.json()
    assert data["recipients"] == [
        {"address": "@tester", "kind": "role", "pending": True},
        {"address": "@alice", "kind": "agent"},
    ]
    assert data["note"] == "nobody holds the role @tester yet; the message waits for its first holder"
    assert fresh.ok("send", "again", "--to", "@tester", "--quiet", agent="alice").err == ""


def test_a_slip_for_a_known_name_is_refused_with_suggestions_and_nothing_stored(fresh):
    fresh.init()
    fresh.agent("alice", "implementer")
    fresh.agent("bob", "reviewer")
    for typed, meant in (("@alcie", "@alice"), ("@reviewr", "@reviewer"), ("@all", "@everyone")):
        r = fresh.run("send", "hello?", "--to", typed, agent="bob")
        assert r.code == 1 and r.out == ""
        assert f"did you mean {meant}" in r.err_line, r.err
    assert fresh.ok("sent", "--json", agent="bob").json()["total"] == 0

"""Delivery states in the store: recipients, what a hook shows next, overdue acks, who may ack."""

from __future__ import annotations

import pytest

from thrum.errors import Forbidden
from thrum.store import delivery

from store_helpers import Events, fold, mid

T0 = "2026-11-27T10:00:00.000Z"


def at(seconds: int) -> str:
    return f"2026-11-27T10:{seconds // 60:02d}:{seconds % 60:02d}.000Z"


@pytest.fixture
def world(db):
    e = Events()
    fold(
        db,
        e.register("alice", "lead"),
        e.register("bob", "dev"),
        e.register("carol", "dev"),
        e.group_create("core"),
        e.member_add("core", "carol"),
    )
    return e


def test_recipients_follow_the_addresses_now_and_leave_out_the_author(db, world):
    e = world
    to_role = e.create("alice", "hi devs", mentions=["dev"])
    to_group = e.create("bob", "hi core", mentions=["core", "alice"])
    to_all = e.create("carol", "hi all", mentions=["everyone"])
    fold(db, to_role, to_group, to_all)
    got = delivery.recipients(db, [mid(to_role), mid(to_group), mid(to_all)])
    assert got == {mid(to_role): ["bob", "carol"], mid(to_group): ["alice", "carol"], mid(to_all): ["alice", "bob"]}


def test_an_overdue_ack_comes_back_once_one_priority_higher(db, world):
    e = world
    ask = e.create("alice", "freeze main", mentions=["bob"], ack=True, ack_within=60, ts=T0)
    fold(db, ask, e.delivered("bob", mid(ask), ts=at(1)))
    first = delivery.pending(db, "bob", limit=10, now_key=at(2))
    assert [m["message_id"] for m in first["messages"]] == [mid(ask)]
    m = first["messages"][0]
    assert m["urgent"] and not m["overdue"] and m["ack"]["due"] == at(60) and not m["ack"]["overdue"]
    fold(db, e.surfaced("bob", mid(ask), ts=at(3)))
    assert delivery.pending(db, "bob", limit=10, now_key=at(30))["messages"] == []  # shown once, not due yet
    late = delivery.pending(db, "bob", limit=10, now_key=at(61))
    assert late["total"] == 1 and late["messages"][0]["overdue"] and late["messages"][0]["ack"]["overdue"]
    fold(db, e.surfaced("bob", mid(ask), ts=at(62)))
    assert delivery.pending(db, "bob", limit=10, now_key=at(120))["messages"] == []  # once
    state = delivery.delivery(db, [mid(ask)], at(120))[mid(ask)]
    assert state["ack"]["overdue"] and state["recipients"][0]["state"] == "surfaced"
    assert state["recipients"][0]["surfaced_at"] == at(3)  # the first surfacing stays
    fold(db, e.acked("bob", mid(ask), ts=at(130)))
    state = delivery.delivery(db, [mid(ask)], at(140))[mid(ask)]["recipients"][0]
    assert (state["state"], state["at"]) == ("acked", at(130))
    assert delivery.unacked_sent(db, "alice", at(140), page=1, page_size=10)["total"] == 0


def test_only_a_recipient_acks(db, world):
    e = world
    note = e.create("alice", "for bob", mentions=["bob"])
    fold(db, note)
    with pytest.raises(Forbidden):
        delivery.check_ackable(db, "carol", [mid(note)])
    with pytest.raises(Forbidden):
        delivery.check_ackable(db, "alice", [mid(note)])  # one's own
    assert delivery.check_ackable(db, "bob", [mid(note)]) == {"ack": [mid(note)], "already": []}


def test_receipts_before_their_message_wait_for_it(db, world):
    e = world
    note = e.create("alice", "late", mentions=["bob"], ts=at(5))
    fold(db, e.acked("bob", mid(note), ts=at(9)), e.surfaced("bob", mid(note), ts=at(8)))
    fold(db, e.delivered("bob", mid(note), ts=at(7)), note)
    r = delivery.delivery(db, [mid(note)], at(10))[mid(note)]["recipients"][0]
    assert (r["delivered_at"], r["surfaced_at"], r["acked_at"], r["state"]) == (at(7), at(8), at(9), "acked")


def test_undelivered_lists_recent_messages_that_reach_each_agent(db, world):
    e = world
    old = e.create("alice", "old", mentions=["bob"], ts="2026-11-01T10:00:00.000Z")
    new = e.create("alice", "new", mentions=["dev"], ts=T0)
    mine = e.create("bob", "mine", mentions=["dev"], ts=T0)
    fold(db, old, new, mine)
    found = delivery.undelivered(db, ["bob", "carol", "ghost"], None, "2026-11-20T00:00:00.000Z")
    assert found == {"bob": [mid(new)], "carol": [mid(new), mid(mine)]}
    fold(db, e.delivered("bob", mid(new)))
    assert delivery.undelivered(db, ["bob"], [mid(new), mid(old)], "2026-11-20T00:00:00.000Z") == {}


def test_messages_arriving_in_the_same_write_count_as_delivered(db, world):
    """A hook's one call: what is being recorded delivered now is shown with what was, oldest first."""
    e = world
    first = e.create("alice", "first", mentions=["bob"], ts=at(1))
    second = e.create("alice", "second", mentions=["bob"], ts=at(2))
    third = e.create("alice", "third", mentions=["bob"], ts=at(3))
    read = e.create("alice", "read already", mentions=["bob"], ts=at(4))
    fold(db, first, second, third, read, e.delivered("bob", mid(second)), e.read("bob", mid(read)))
    assert delivery.pending(db, "bob", limit=10, now_key=at(5))["total"] == 1
    got = delivery.pending(db, "bob", limit=2, now_key=at(5), arriving=[mid(third), mid(first), mid(read)])
    assert [m["message_id"] for m in got["messages"]] == [mid(first), mid(second)]
    assert got["total"] == 3  # the read one stays out

"""Shared mailboxes (Gas City mail), subjects, archived-only listings and thread lists in the store."""

from __future__ import annotations

import random

import pytest

from thrum import events as ev
from thrum.errors import ValidationError
from thrum.store import queries
from thrum.store.database import create_schema, open_database

from store_helpers import Events, fold, ids, mid

BOX = "gc_mayor"


@pytest.fixture
def e():
    return Events()


@pytest.fixture
def city(db, e):
    """Two machines' agents for the mayor's mailbox, one for the witness's, and a thrum agent."""
    fold(
        db,
        e.register("gcr_aaaaaaaa_mayor", "gc", module=BOX),
        e.register("gcr_bbbbbbbb_mayor", "gc", module=BOX),
        e.register("gcr_aaaaaaaa_witness", "gc", module="gc_witness"),
        e.register("alice", "dev"),
    )
    return e


def box(db, **kw):
    return queries.mailbox_list(db, BOX, **kw)


def test_a_mailbox_holds_what_mentions_it_by_name_oldest_first(db, city):
    e = city
    a = e.create("gcr_aaaaaaaa_witness", "one", mentions=[BOX])
    b = e.create("alice", "two", mentions=["@" + BOX])
    c = e.create("alice", "to the role", mentions=["gc"])
    d = e.create("alice", "to everyone", mentions=["everyone"])
    gone = e.create("gcr_aaaaaaaa_witness", "deleted", mentions=[BOX])
    fold(db, a, b, c, d, gone, e.delete("gcr_aaaaaaaa_witness", mid(gone)))
    result = box(db)
    assert ids(result) == [mid(a), mid(b)]
    assert (result["total"], result["unread"]) == (2, 2)
    assert ids(box(db, newest_first=True)) == [mid(b), mid(a)]
    assert ids(box(db, page=2, page_size=1)) == [mid(b)] and box(db, page_size=1)["total_pages"] == 2


def test_read_state_is_the_latest_mark_of_any_keeper_and_arrival_order_does_not_matter(tmp_path, city):
    e = city
    msg = e.create("gcr_aaaaaaaa_witness", "x", mentions=[BOX])
    marks = [
        e.read("gcr_aaaaaaaa_mayor", mid(msg)),
        e.unread("gcr_bbbbbbbb_mayor", mid(msg)),
        e.read("alice", mid(msg)),
    ]  # alice does not keep the mailbox: her mark does not count
    registers = [
        city.register(n, "gc", module=m)
        for n, m in (("gcr_aaaaaaaa_mayor", BOX), ("gcr_bbbbbbbb_mayor", BOX), ("alice", "dev"))
    ]
    results = set()
    for seed in range(4):
        database = open_database(tmp_path / f"db{seed}.sqlite")
        create_schema(database)
        events = [msg, *marks, *registers]
        random.Random(seed).shuffle(events)
        fold(database, *events)
        listed = queries.mailbox_list(database, BOX)
        state = queries.mailbox_states(database, [mid(msg)])[mid(msg)]
        results.add(
            (
                tuple((m["message_id"], m["is_read"]) for m in listed["messages"]),
                listed["unread"],
                state["read"],
                state["archived"],
            )
        )
        database.close()
    assert results == {(((mid(msg), False),), 1, False, False)}


def test_archived_by_any_keeper_leaves_the_mailbox(db, city):
    e = city
    kept, gone = e.create("alice", "keep", mentions=[BOX]), e.create("alice", "gone", mentions=[BOX])
    fold(
        db,
        kept,
        gone,
        e.read("gcr_aaaaaaaa_mayor", mid(kept)),
        e.archive("gcr_bbbbbbbb_mayor", mid(gone)),
        e.archive("alice", mid(kept)),
    )  # not a keeper
    result = box(db)
    assert [(m["message_id"], m["is_read"]) for m in result["messages"]] == [(mid(kept), True)]
    assert (result["total"], result["unread"]) == (1, 0)
    assert box(db, unread_only=True)["messages"] == []
    assert queries.mailbox_states(db, [mid(kept), mid(gone)]) == {
        mid(kept): {"read": True, "archived": False},
        mid(gone): {"read": False, "archived": True},
    }


def test_the_agent_named_like_the_mailbox_keeps_it_too(db, city):
    e = city
    fold(db, e.register("bob", "dev"))
    msg = e.create("alice", "for bob", mentions=["bob"])
    fold(db, msg, e.read("bob", mid(msg)))
    assert [m["is_read"] for m in queries.mailbox_list(db, "bob")["messages"]] == [True]


def test_subject_is_kept_by_the_fold_and_shown(db, e):
    fold(db, e.register("alice", "dev"))
    rec = Events.rec(
        ev.MessageCreate(agent_id="alice", session_id="ses_alice", body=ev.Body("b"), subject="Hello", **e._common())
    )
    plain = e.create("alice", "no subject")
    assert "subject" not in plain[1] or plain[1]["subject"] == ""
    fold(db, rec, plain)
    assert queries.get_message(db, mid(rec))["message"]["subject"] == "Hello"
    by_id = {m["message_id"]: m["subject"] for m in queries.list_messages(db, page_size=10)["messages"]}
    assert by_id == {mid(rec): "Hello", mid(plain): ""}


def test_subject_lines_and_their_absence(e):
    with_subject = ev.MessageCreate(agent_id="alice", session_id="ses_alice", body=ev.Body("b"), subject="S")
    without = ev.MessageCreate(agent_id="alice", session_id="ses_alice", body=ev.Body("b"))
    assert b'"subject":"S"' in with_subject.to_line() and b"subject" not in without.to_line()
    assert ev.decode_line(with_subject.to_line())["subject"] == "S"
    assert ev.decode_line(without.to_line())["subject"] == ""
    with pytest.raises(ev.MalformedEvent):
        ev.decode_line(with_subject.to_line().replace(b'"subject":"S"', b'"subject":7'))
    with pytest.raises(ValidationError):
        ev.MessageCreate(agent_id="alice", session_id="ses_alice", body=ev.Body("b"), subject="x" * 5000)


def test_archived_only_lists_the_viewers_archive(db, e):
    fold(db, e.register("alice", "dev"), e.register("bob", "dev"))
    a, b, c = (e.create("alice", t) for t in "abc")
    fold(db, a, b, c, e.archive("bob", mid(a), mid(c)), e.archive("alice", mid(b)))
    assert ids(queries.list_messages(db, viewer="bob", archived_only=True, page_size=10)) == [mid(c), mid(a)]
    assert ids(queries.list_messages(db, viewer="bob", page_size=10)) == [mid(b)]
    assert queries.list_messages(db, archived_only=True)["total"] == 0  # no viewer: nobody's archive


def test_thread_list_newest_activity_first_with_counts(db, e):
    fold(db, e.register("alice", "dev"), e.register("bob", "dev"), e.register("carol", "dev"))
    t1 = e.create("alice", "first thread", thread_id="thr_01JD5QA0B1C2D3E4F5G6H7J8K1")
    t2 = e.create("bob", "second thread", thread_id="thr_01JD5QA0B1C2D3E4F5G6H7J8K2")
    r1 = e.create("bob", "reply in first", thread_id="thr_01JD5QA0B1C2D3E4F5G6H7J8K1")
    t3 = e.create("carol", "archived by bob", thread_id="thr_01JD5QA0B1C2D3E4F5G6H7J8K3")
    fold(db, t1, t2, r1, t3, e.read("bob", mid(t1)), e.archive("bob", mid(t3)))
    listed = queries.thread_list(db, "bob", page=1, page_size=10)
    assert [t["thread_id"] for t in listed["threads"]] == [
        "thr_01JD5QA0B1C2D3E4F5G6H7J8K1",
        "thr_01JD5QA0B1C2D3E4F5G6H7J8K2",
    ]
    first, second = listed["threads"]
    assert (first["message_count"], first["unread_count"], first["last_sender"], first["preview"]) == (
        2,
        0,
        "bob",
        "reply in first",
    )
    assert (second["message_count"], second["unread_count"]) == (1, 0)  # bob's own
    assert listed["total"] == 2 and listed["total_pages"] == 1
    alice = queries.thread_list(db, "alice", page=1, page_size=1)
    assert alice["total"] == 3 and alice["total_pages"] == 3
    assert alice["threads"][0]["thread_id"] == "thr_01JD5QA0B1C2D3E4F5G6H7J8K3"
    assert alice["threads"][0]["unread_count"] == 1


def test_thread_items_carry_read_by(db, e):
    fold(db, e.register("alice", "dev"), e.register("bob", "dev"))
    a = e.create("alice", "a", thread_id="thr_01JD5QA0B1C2D3E4F5G6H7J8K1")
    fold(db, a, e.read("bob", mid(a)))
    (item,) = queries.thread_messages(db, mid(a))
    assert item["read_by"] == ["bob"]

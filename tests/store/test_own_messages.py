"""One's own messages are never unread to oneself (issue 9), whichever way a query
is answered: the counters, one scan of a selective filter, or plain SQL."""

from __future__ import annotations

import pytest

from thrum.store import inbox, queries

from store_helpers import Events, fold, ids, mid


@pytest.fixture
def world(db):
    e = Events()
    recs = [e.register("alice", "dev"), e.register("bob", "qa")]
    mine = [e.create("alice", f"mine {i}", mentions=["everyone"], scopes=[("module", "x")]) for i in range(3)]
    theirs = [e.create("bob", f"theirs {i}", mentions=["everyone"], scopes=[("module", "x")]) for i in range(2)]
    # alice once marked one of her own messages unread, and archived another: neither makes it unread
    fold(
        db,
        *recs,
        *mine,
        *theirs,
        e.unread("alice", mid(mine[0])),
        e.archive("alice", mid(mine[1])),
        e.read("alice", mid(theirs[0])),
    )
    return [mid(m) for m in mine], [mid(t) for t in theirs]


@pytest.mark.parametrize("path", ["counters", "one_pass", "sql"])
def test_own_messages_are_read_for_their_author_on_every_path(db, world, path, monkeypatch):
    mine, theirs = world
    kw = {"_use_counters": path == "counters"}
    if path == "sql":
        monkeypatch.setattr(inbox, "ONE_PASS_MAX", -1)
    scoped = {} if path == "counters" else {"scope": ("module", "x")}

    everything = queries.list_messages(db, viewer="alice", page_size=100, **scoped, **kw)
    assert everything["total"] == 4 and everything["unread"] == 1  # mine[1] archived
    assert {m["message_id"]: m["is_read"] for m in everything["messages"]} == {
        mine[0]: True,
        mine[2]: True,
        theirs[0]: True,
        theirs[1]: False,
    }
    unread = queries.list_messages(db, viewer="alice", unread_for="alice", **scoped, **kw)
    assert ids(unread) == [theirs[1]] and unread["total"] == unread["unread"] == 1
    explicit = queries.list_messages(db, mention_role="dev", unread_for="alice", **scoped, **kw)
    assert ids(explicit) == [theirs[1]]
    sent = queries.list_messages(db, viewer="alice", author_id="alice", include_archived=True, **scoped, **kw)
    assert sent["total"] == 3 and sent["unread"] == 0


def test_counts_get_thread_and_unread_ids_treat_own_messages_as_read(db, world):
    mine, theirs = world
    assert queries.counts(db, "alice") == {"total": 2, "unread": 1}
    assert queries.get_message(db, mine[0], viewer="alice")["message"]["is_read"] is True
    assert queries.get_message(db, mine[0], viewer="bob")["message"]["is_read"] is False
    assert queries.unread_ids(db, "alice") == [theirs[1]]
    assert all(m["is_read"] for m in queries.thread_messages(db, mine[0], viewer="alice"))

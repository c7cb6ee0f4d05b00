"""message.search over the real socket, and the search index surviving damage: a corrupt index is
rebuilt when SQLite says so, one that silently disagrees is found and rebuilt by `thrum doctor`."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from thrum import errors

from faults_helpers import start_daemon


@pytest.fixture
def team(tmp_path):
    d = start_daemon(tmp_path / "d")
    d.register("alice", "implementer")
    d.register("bob", "reviewer")
    yield d
    d.stop()


def _search(d, query: str, **params) -> dict:
    return d.call("message.search", {"caller": "alice", "query": query, **params})


def _found(d, query: str, **params) -> set[str]:
    out: set[str] = set()
    page = 1
    while True:
        result = _search(d, query, page_size=100, page=page, **params)
        out |= {m["message_id"] for m in result["messages"]}
        if page >= result["total_pages"]:
            assert len(out) == result["total"]
            return out
        page += 1


def test_search_over_rpc_follows_sends_edits_deletes_and_archives(team):
    d = team
    with d.client() as c:
        a = c.call("message.send", {"caller": "bob", "content": "the parse_config fix is in", "to": ["@alice"]})
        b = c.call(
            "message.send",
            {
                "caller": "bob",
                "content": "rollout plan",
                "subject": "Rollout",
                "scopes": [{"type": "module", "value": "auth"}],
            },
        )
    a, b = a["message_id"], b["message_id"]
    result = _search(d, "parse_config")
    assert [m["message_id"] for m in result["messages"]] == [a] and result["total"] == 1
    hit = result["messages"][0]
    assert [s["text"] for s in hit["snippet"] if s["hit"]] == ["parse_config"]
    assert hit["is_read"] is False and hit["agent_id"] == "bob"
    assert _found(d, "from:bob scope:module:auth") == {b}
    assert _found(d, f"in:{b}") == {b}  # a message id names its thread
    assert _found(d, "to:me is:unread") == {a}
    d.call("message.edit", {"caller": "bob", "message_id": a, "content": "the fix is merged"})
    assert _found(d, "parse_config") == set() and _found(d, "merged") == {a}
    d.call("message.archive", {"caller": "alice", "message_ids": [b]})
    assert _found(d, "rollout") == set()
    assert _found(d, "rollout is:archived") == {b} == _found(d, "rollout", archived=True)
    d.call("message.delete", {"caller": "bob", "message_id": a})
    assert _found(d, "merged") == set()


def _error(d, params: dict) -> errors.ThrumError:
    with pytest.raises(errors.ThrumError) as info:
        d.call("message.search", params)
    return info.value


def test_bad_queries_are_params_errors_naming_the_query(team):
    for query, words in [
        ('"open', "unbalanced quote"),
        ("color:red", "unknown field 'color:'"),
        ("-", "a lone '-'"),
        ("is:unread -", "a lone '-'"),
    ]:
        err = _error(team, {"caller": "alice", "query": query})
        assert err.code == errors.INVALID_PARAMS and err.data["field"] == "query", query
        assert words in err.message and "\n" not in err.message, query
        assert "sqlite" not in err.message.lower() and "fts5" not in err.message.lower()
    assert "thread thr_ZZZZZZ not found" in _error(team, {"caller": "alice", "query": "in:thr_ZZZZZZ"}).message
    assert _error(team, {"caller": "alice"}).data["field"] == "query"
    assert _error(team, {"caller": "alice", "query": "x", "page_size": 500}).data["field"] == "page_size"


def _send_many(d, n: int) -> set[str]:
    with d.client() as c:
        return {
            c.call("message.send", {"caller": "bob", "content": f"note {i} about the quarterly rollout " + "w" * 300})[
                "message_id"
            ]
            for i in range(n)
        }


def test_a_corrupt_search_index_is_rebuilt_and_the_search_answered(team):
    d = team
    sent = _send_many(d, 150)
    d.stop()
    db_path = Path(d.paths.database)
    with sqlite3.connect(db_path) as db:  # the index's own pages, not the messages'
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [n for (n,) in db.execute("SELECT pageno FROM dbstat WHERE name = 'message_search_data'")]
    for suffix in ("-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    assert len(pages) > 3
    data = bytearray(db_path.read_bytes())
    for n in pages:
        data[(n - 1) * 4096 : n * 4096] = random.Random(n).randbytes(4096)
    db_path.write_bytes(bytes(data))
    d.start()
    assert _found(d, "quarterly rollout") == sent
    assert "is corrupt" in d.log_text()
    assert _search(d, "rollout")["total"] == 150


def test_doctor_finds_an_index_that_disagrees_with_the_messages_and_rebuilds_it(team):
    d = team
    sent = sorted(_send_many(d, 5))
    ok = next(c for c in d.call("doctor.run")["checks"] if c["check"] == "search")
    assert ok["status"] == "ok"
    d.stop()
    with sqlite3.connect(d.paths.database) as db:  # one entry taken out behind the daemon's back
        db.execute(
            "INSERT INTO message_search(message_search, rowid, body, subject, author, tags, thread, parts) "
            "SELECT 'delete', rid, body, subject, author, tags, thread, parts FROM message_search_content "
            "WHERE rid = (SELECT rowid FROM messages WHERE message_id = ?)",
            (sent[0],),
        )
    d.start()
    assert _found(d, "quarterly") == set(sent[1:])  # silently missing: no error says so
    check = next(c for c in d.call("doctor.run")["checks"] if c["check"] == "search")
    assert check["status"] == "info" and "4 entries for 5 live messages" in check["detail"]
    assert "rebuilt" in check["detail"]
    assert _found(d, "quarterly") == set(sent)
    again = next(c for c in d.call("doctor.run")["checks"] if c["check"] == "search")
    assert again["status"] == "ok"
    d.call("message.send", {"caller": "bob", "content": "quarterly after the repair"})
    assert len(_found(d, "quarterly")) == 6  # the triggers came back with the index

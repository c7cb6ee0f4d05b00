"""The daemon's JSON-RPC surface over the real Unix socket."""

from __future__ import annotations

import os
import stat
import threading

from thrum import errors

from daemon_helpers import RawClient, register


def test_socket_is_private(shared_daemon):
    mode = stat.S_IMODE(os.stat(shared_daemon.socket).st_mode)
    assert mode == 0o600


def test_malformed_input_gets_standard_errors_and_the_connection_survives(shared):
    client = shared
    client.send_raw(b"{not json\n")
    assert client.read()["error"]["code"] == errors.PARSE_ERROR
    client.send_raw(b"[1, 2]\n")
    batch = client.read()
    assert [r["error"]["code"] for r in batch] == [errors.INVALID_REQUEST] * 2
    client.send_raw(b'{"jsonrpc": "1.0", "id": 7, "method": "health"}\n')
    assert client.read() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": errors.INVALID_REQUEST, "message": 'invalid request: "jsonrpc" must be "2.0"'},
    }
    assert client.request("no.such.method")["error"]["code"] == errors.METHOD_NOT_FOUND
    reply = client.request("agent.register", {"name": "Bad Name!", "role": "x"})
    assert reply["error"]["code"] == errors.INVALID_PARAMS
    assert reply["error"]["data"]["field"] == "name"
    reply = client.request("message.list", {"page_size": "ten"})
    assert reply["error"]["code"] == errors.INVALID_PARAMS
    assert "page_size" in reply["error"]["message"]
    client.send_raw(b'{"jsonrpc":"2.0","method":"health","params":[1]}\n')  # notification: no answer
    assert client.call("health")["status"] == "ok"


def test_send_list_get_edit_delete_round_trip(shared, names):
    client = shared
    alice, bob, implementer, reviewer = names("alice", "bob", "impl", "rev")
    register(client, alice, implementer)
    register(client, bob, reviewer)
    sent = client.call(
        "message.send",
        {
            "caller": alice,
            "content": "auth done",
            "to": [f"@{reviewer}"],
            "scopes": [{"type": "module", "value": "auth"}],
            "refs": [{"type": "issue", "value": "beads-42"}],
        },
    )
    mid = sent["message_id"]
    assert mid.startswith("msg_")
    assert sent["thread_id"].startswith("thr_")
    inbox = client.call("message.list", {"caller": bob, "mentions": True, "unread": True})
    assert [m["message_id"] for m in inbox["messages"]] == [mid]
    assert inbox["unread"] == 1
    assert inbox["total"] == 1
    assert inbox["messages"][0]["is_read"] is False
    got = client.call("message.get", {"message_id": mid})["message"]
    assert got["author"]["agent_id"] == alice
    assert {"type": "mention", "value": reviewer} in got["refs"]
    assert got["scopes"] == [{"type": "module", "value": "auth"}]
    edited = client.call("message.edit", {"caller": alice, "message_id": mid, "content": "auth done v2"})
    assert edited["version"] == 1
    forbidden = client.request("message.edit", {"caller": bob, "message_id": mid, "content": "mine"})
    assert forbidden["error"]["code"] == errors.FORBIDDEN
    marked = client.call("message.markRead", {"caller": bob, "message_ids": [mid]})
    assert marked["marked_count"] == 1
    assert client.call("message.list", {"caller": bob, "unread": True})["total"] == 0
    client.call("message.delete", {"caller": alice, "message_id": mid, "reason": "obsolete"})
    got = client.call("message.get", {"message_id": mid})["message"]
    assert got["deleted"] is True
    assert got["metadata"]["delete_reason"] == "obsolete"
    assert got["body"]["content"] == "auth done v2"
    assert client.call("message.list", {"caller": bob, "author_id": alice})["total"] == 0
    again = client.request("message.edit", {"caller": alice, "message_id": mid, "content": "x"})
    assert again["error"]["code"] == errors.CONFLICT


def test_unknown_recipient_is_refused_with_close_matches_and_nothing_stored(shared, names):
    client = shared
    alice, bob, implementer, reviewer = names("alice", "bob", "impl", "rev")
    register(client, alice, implementer)
    register(client, bob, reviewer)
    reply = client.request("message.send", {"caller": alice, "content": "hi", "to": [f"@{reviewer}x"]})
    assert reply["error"]["code"] == errors.UNKNOWN_RECIPIENT
    assert f"@{reviewer}" in reply["error"]["data"]["close_matches"] or reviewer in str(reply["error"])
    assert client.call("message.list", {"author_id": alice})["total"] == 0


def test_oversized_body_and_bad_structured_are_refused(shared, names):
    client = shared
    alice, implementer = names("alice", "impl")
    register(client, alice, implementer)
    big = client.request("message.send", {"caller": alice, "content": "x" * (1024 * 1024 + 1)})
    assert big["error"]["code"] == errors.INVALID_PARAMS
    assert big["error"]["data"]["field"] == "content"
    bad = client.request("message.send", {"caller": alice, "content": "x", "structured": "{nope"})
    assert bad["error"]["code"] == errors.INVALID_PARAMS
    assert bad["error"]["data"]["field"] == "structured"
    assert client.call("message.list", {"author_id": alice})["total"] == 0
    assert client.call("health")["status"] == "ok"


def test_unknown_caller_is_an_identity_error(shared, names):
    client = shared
    (ghost,) = names("ghost")
    reply = client.request("message.send", {"caller": ghost, "content": "boo"})
    assert reply["error"]["code"] == errors.IDENTITY_ERROR
    assert "quickstart" in reply["error"]["message"]


def test_ten_concurrent_clients_send_a_hundred_each_without_error(daemon, client):
    for i in range(10):
        register(client, f"agent{i}", "worker")
    failures = []

    def worker(i):
        c = RawClient(daemon)
        try:
            for n in range(100):
                reply = c.request("message.send", {"caller": f"agent{i}", "content": f"{i}-{n}"})
                if "error" in reply:
                    failures.append(reply["error"])
        finally:
            c.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert client.call("message.list", {"page_size": 1})["total"] == 1000
    shard = daemon.main_repo / ".git" / "thrum-sync" / "a-sync" / "messages" / "agent3" / "000001.jsonl"
    events = [line for line in shard.read_bytes().splitlines() if b'"type":"seal"' not in line]
    assert len(events) == 100  # (a sync that ran meanwhile may have sealed them: seals are not events)


def test_groups_resolve_at_read_time(shared, names):
    client = shared
    alice, bob, carol, implementer, reviewer, backend = names("alice", "bob", "carol", "impl", "rev", "backend")
    register(client, alice, implementer)
    register(client, bob, reviewer)
    client.call("group.create", {"caller": alice, "name": backend, "description": "Backend"})
    client.call("group.member.add", {"caller": alice, "group": backend, "member": reviewer, "member_type": "role"})
    sent = client.call("message.send", {"caller": alice, "content": "review please", "to": [f"@{backend}"]})
    register(client, carol, reviewer)  # joins the role after the message was sent
    inbox = client.call("message.list", {"caller": carol, "mentions": True})
    assert [m["message_id"] for m in inbox["messages"]] == [sent["message_id"]]
    members = client.call("group.members", {"name": backend, "expand": True})
    assert members["agents"] == [bob, carol]
    denied = client.request("group.delete", {"caller": alice, "name": "everyone"})
    assert denied["error"]["code"] == errors.FORBIDDEN


def test_a_log_write_failure_is_reported_and_the_daemon_keeps_serving(daemon, client):
    import shutil

    register(client, "alice", "implementer")
    client.call("message.send", {"caller": "alice", "content": "before"})
    shard = daemon.main_repo / ".git" / "thrum-sync" / "a-sync" / "messages" / "alice" / "000001.jsonl"
    saved = shard.read_bytes()
    shard.unlink()
    shard.mkdir()  # a hostile neighbour: the shard is now a directory, every append fails
    reply = client.request("message.send", {"caller": "alice", "content": "lost?"})
    assert reply["error"]["code"] == errors.UNAVAILABLE
    assert "cannot write the event log" in reply["error"]["message"]
    shutil.rmtree(shard)
    shard.write_bytes(saved)
    client.call("message.send", {"caller": "alice", "content": "after"})
    contents = [m["body"]["content"] for m in client.call("message.list", {"page_size": 10})["messages"]]
    assert contents == ["after", "before"]


def test_deeply_nested_structured_content_is_a_params_error(shared, names):
    client = shared
    alice, implementer = names("alice", "impl")
    register(client, alice, implementer)
    nested: list = [1]
    for _ in range(35):
        nested = [nested]
    for structured in ("[" * 50_000 + "]" * 50_000, nested):
        reply = client.request("message.send", {"caller": alice, "content": "x", "structured": structured})
        if isinstance(structured, str):
            assert reply["error"]["code"] == errors.INVALID_PARAMS
            assert reply["error"]["data"]["field"] == "structured"
        else:  # 37 levels is within the limit
            assert "result" in reply
    deep = {"a": None}
    node = deep
    for _ in range(200):
        node["a"] = {"a": None}
        node = node["a"]
    reply = client.request("message.send", {"caller": alice, "content": "x", "structured": deep})
    assert reply["error"]["code"] == errors.INVALID_PARAMS
    assert client.call("health")["status"] == "ok"

"""Issue 9 over the real socket: what a new user trips over in the RPC (each test
failed before its fix)."""

from __future__ import annotations

import pytest

from thrum import errors, identity, lifecycle

from daemon_helpers import RawClient, register


def _error(client: RawClient, method: str, params: dict) -> dict:
    reply = client.request(method, params)
    assert "error" in reply, f"{method} should have failed: {reply}"
    return reply["error"]


def _ids(listing: dict) -> list[str]:
    return [m["message_id"] for m in listing["messages"]]


# --------------------------------------------------------------------------- caller resolution


def _alice_and_bob(client, names):
    """This test's alice (an implementer) and bob (a reviewer), registered: their names and roles."""
    alice, bob, implementer, reviewer = names("alice", "bob", "impl", "rev")
    register(client, alice, implementer)
    register(client, bob, reviewer)
    return alice, bob, implementer, reviewer


def test_omitted_caller_is_the_repositorys_single_identity(daemon, client):
    register(client, "alice", "implementer")
    register(client, "bob", "reviewer")
    identity.write(daemon.identities, identity.Identity(name="bob", role="reviewer"))
    mid = client.call("message.send", {"caller": "alice", "content": "review?", "to": ["@reviewer"]})["message_id"]
    # the spec's own examples omit caller
    listed = client.call("message.list", {"mentions": True, "unread": True})
    assert _ids(listed) == [mid] and listed["unread"] == 1
    assert client.call("message.markRead", {"message_ids": [mid]})["marked_count"] == 1
    assert client.call("message.list", {"caller": "bob", "unread": True})["total"] == 0


def test_omitted_caller_without_a_single_identity_names_the_param(daemon, client):
    register(client, "alice", "implementer")
    err = _error(client, "message.list", {"unread": True})
    assert err["code"] == errors.INVALID_PARAMS and err["data"]["field"] == "caller"
    assert "caller is required" in err["message"] and "no agent identity" in err["message"]
    for name, role in (("alice", "implementer"), ("carol", "tester")):
        identity.write(daemon.identities, identity.Identity(name=name, role=role))
    err = _error(client, "message.markRead", {"all": True})
    assert err["data"]["field"] == "caller" and "2 agent identities (alice, carol)" in err["message"]


# --------------------------------------------------------------------------- replies


def test_a_reply_mentions_the_parents_author_and_keeps_explicit_addresses(shared, names):
    client = shared
    alice, bob, carol, implementer, reviewer, tester = names("alice", "bob", "carol", "impl", "rev", "tester")
    register(client, alice, implementer)
    register(client, bob, reviewer)
    register(client, carol, tester)
    ask = client.call("message.send", {"caller": alice, "content": "review?", "to": [f"@{reviewer}"]})["message_id"]
    answer = client.call("message.send", {"caller": bob, "content": "done", "reply_to": ask, "to": [f"@{carol}"]})
    assert answer["recipients"] == [
        {"address": f"@{carol}", "kind": "agent"},
        {"address": f"@{alice}", "kind": "agent"},
    ]
    inbox = client.call("message.list", {"caller": alice, "mentions": True, "unread": True})
    assert _ids(inbox) == [answer["message_id"]]
    assert _ids(client.call("message.list", {"caller": carol, "mentions": True})) == [answer["message_id"]]
    # a follow-up to one's own message reaches its addressees again (issue 30, item 10)
    own = client.call("message.send", {"caller": alice, "content": "also", "reply_to": ask})
    assert own["recipients"] == [{"address": f"@{reviewer}", "kind": "role"}]


def test_replying_to_a_deleted_message_is_refused(shared, names):
    client = shared
    alice, bob, implementer, reviewer = _alice_and_bob(client, names)
    mid = client.call("message.send", {"caller": alice, "content": "oops"})["message_id"]
    client.call("message.delete", {"caller": alice, "message_id": mid})
    err = _error(client, "message.send", {"caller": bob, "content": "re", "reply_to": mid})
    assert err["code"] == errors.CONFLICT and "deleted" in err["message"]


# --------------------------------------------------------------------------- names


def test_names_that_would_shadow_other_addresses_are_refused(client):
    register(client, "bob", "reviewer")
    client.call("group.create", {"caller": "bob", "name": "backend"})
    cases = [
        ({"name": "everyone", "role": "implementer"}, errors.INVALID_PARAMS, "built-in group"),
        ({"name": "reviewer", "role": "implementer"}, errors.CONFLICT, "@reviewer is already a role"),
        ({"name": "backend", "role": "implementer"}, errors.CONFLICT, "@backend is already a group"),
        ({"name": "alice", "role": "bob"}, errors.CONFLICT, "role @bob is already an agent"),
        ({"name": "alice", "role": "backend"}, errors.CONFLICT, "role @backend is already a group"),
        ({"name": "alice", "role": "everyone"}, errors.INVALID_PARAMS, "built-in group"),
    ]
    for params, code, needle in cases:
        err = _error(client, "agent.register", params)
        assert err["code"] == code and needle in err["message"], (params, err)
    assert [a["name"] for a in client.call("agent.list")["agents"]] == ["bob"]
    # re-registering an existing agent with its own role stays possible
    assert client.call("agent.register", {"name": "bob", "role": "reviewer", "display": "Bob"})["updated"]


# --------------------------------------------------------------------------- sessions


def test_an_agent_writes_only_under_its_own_active_session(shared, names):
    client = shared
    alice, bob, implementer, reviewer = _alice_and_bob(client, names)
    bobs = client.call("session.start", {"caller": bob})["session_id"]
    err = _error(client, "message.send", {"caller": alice, "content": "x", "session_id": bobs})
    assert err["code"] == errors.FORBIDDEN and f"belongs to @{bob}" in err["message"]
    mine = client.call("session.start", {"caller": alice})["session_id"]
    assert client.call("message.send", {"caller": alice, "content": "x", "session_id": mine})["session_id"] == mine
    client.call("session.end", {"caller": alice, "session_id": mine})
    err = _error(client, "message.send", {"caller": alice, "content": "x", "session_id": mine})
    assert err["code"] == errors.CONFLICT and "has ended" in err["message"]
    err = _error(client, "session.heartbeat", {"caller": alice, "session_id": "ses_NOPE"})
    assert err["code"] == errors.NOT_FOUND
    listed = client.call("message.list", {"caller": bob, "author_id": alice})
    assert listed["total"] == 1  # only the message sent under alice's own session


# --------------------------------------------------------------------------- worktree


def test_worktree_is_a_name_never_a_local_path(shared, names):
    client = shared
    alice, implementer = names("alice", "impl")
    err = _error(client, "agent.register", {"name": alice, "role": implementer, "worktree": "/home/alice/app"})
    assert err["code"] == errors.INVALID_PARAMS and err["data"]["field"] == "worktree"
    agent = client.call("agent.register", {"name": alice, "role": implementer, "worktree": "feature_x"})["agent"]
    assert agent["worktree"] == "feature_x"


# --------------------------------------------------------------------------- content


@pytest.mark.parametrize(
    "params, needle",
    [
        ({"content": ""}, "content is empty"),
        ({"content": "  \n"}, "content is empty"),
        ({"content": "not json", "format": "json"}, "not valid JSON"),
    ],
)
def test_bad_content_is_refused_over_rpc(shared, names, params, needle):
    client = shared
    alice, implementer = names("alice", "impl")
    register(client, alice, implementer)
    err = _error(client, "message.send", {"caller": alice, **params})
    assert err["code"] == errors.INVALID_PARAMS and err["data"]["field"] == "content" and needle in err["message"]
    assert client.call("message.list", {"author_id": alice})["total"] == 0


def test_json_content_and_structured_only_messages_are_accepted(shared, names):
    client = shared
    alice, implementer = names("alice", "impl")
    register(client, alice, implementer)
    client.call("message.send", {"caller": alice, "content": '{"ok": true}', "format": "json"})
    client.call("message.send", {"caller": alice, "content": "", "structured": {"passed": 45}})
    mid = client.call("message.send", {"caller": alice, "content": "x"})["message_id"]
    err = _error(client, "message.edit", {"caller": alice, "message_id": mid, "content": " "})
    assert err["data"]["field"] == "content"
    assert client.call("message.list", {"author_id": alice})["total"] == 3


# --------------------------------------------------------------------------- receipts


def test_marked_count_counts_only_messages_that_changed_state(shared, names):
    client = shared
    alice, bob, implementer, reviewer = _alice_and_bob(client, names)
    a = client.call("message.send", {"caller": alice, "content": "a"})["message_id"]
    b = client.call("message.send", {"caller": alice, "content": "b"})["message_id"]
    assert client.call("message.markRead", {"caller": bob, "message_ids": [a]})["marked_count"] == 1
    assert client.call("message.markRead", {"caller": bob, "message_ids": [a, b]})["marked_count"] == 1
    assert client.call("message.markRead", {"caller": bob, "message_ids": [a, b]})["marked_count"] == 0
    assert client.call("message.markUnread", {"caller": bob, "message_ids": [a]})["marked_count"] == 1
    assert client.call("message.markUnread", {"caller": bob, "message_ids": [a]})["marked_count"] == 0


def test_mark_unread_names_the_archived_messages_it_cannot_bring_back(shared, names):
    client = shared
    alice, bob, implementer, reviewer = _alice_and_bob(client, names)
    a, b, c = (
        client.call("message.send", {"caller": alice, "content": text, "to": [f"@{bob}"]})["message_id"]
        for text in "abc"
    )
    client.call("message.markRead", {"caller": bob, "message_ids": [a, b, c]})
    client.call("message.archive", {"caller": bob, "message_ids": [c, a]})
    got = client.call("message.markUnread", {"caller": bob, "message_ids": [a, b, c]})
    assert got == {"marked_count": 3, "archived": [a, c]}  # marked, but an archive is final
    inbox = client.call("message.list", {"caller": bob, "unread": True, "author_id": alice})
    assert _ids(inbox) == [b]
    assert client.call("message.markUnread", {"caller": bob, "message_ids": [b]}) == {
        "marked_count": 0,
        "archived": [],
    }
    # Gas City mail judges by the mailbox: archived by any of its keepers
    got = client.call("message.markUnread", {"caller": bob, "message_ids": [a, b], "mailbox_state": True})
    assert got["archived"] == [a]


# --------------------------------------------------------------------------- id prefixes


def test_unique_id_prefixes_work_wherever_an_id_is_taken(shared, names):
    client = shared
    alice, bob, implementer, reviewer = _alice_and_bob(client, names)
    mid = client.call("message.send", {"caller": alice, "content": "first"})["message_id"]
    short = mid[:-8]
    assert client.call("message.get", {"message_id": short})["message"]["message_id"] == mid
    assert client.call("message.get", {"message_id": short.lower()})["message"]["message_id"] == mid
    reply = client.call("message.send", {"caller": bob, "content": "re", "reply_to": short})
    assert reply["reply_to"] == mid
    assert client.call("message.markRead", {"caller": bob, "message_ids": [short]})["marked_count"] == 1
    thread = client.call("message.thread", {"thread_id": reply["thread_id"][:-6]})
    assert [m["message_id"] for m in thread["messages"]] == [mid, reply["message_id"]]
    edited = client.call("message.edit", {"caller": alice, "message_id": short, "content": "first!"})
    assert edited["message_id"] == mid


def test_an_ambiguous_prefix_lists_the_candidates(client):
    register(client, "alice", "implementer")
    ids = [client.call("message.send", {"caller": "alice", "content": str(i)})["message_id"] for i in range(3)]
    common = "msg_"
    for i in range(4, 30):
        if len({m[:i] for m in ids}) > 1:
            break
        common = ids[0][:i]
    err = _error(client, "message.get", {"message_id": common})
    assert err["code"] == errors.INVALID_PARAMS and "ambiguous" in err["message"]
    assert err["data"]["candidates"] == sorted(ids) and err["data"]["field"] == "message_id"
    err = _error(client, "message.get", {"message_id": "msg_ZZZZZZZZ"})
    assert err["code"] == errors.NOT_FOUND


# --------------------------------------------------------------------------- last seen


def test_last_seen_comes_from_the_log_and_survives_a_restart(daemon, client):
    """Last seen is the newest event that shows the agent acting (thrum.presence): the
    same on every replica, and kept across restarts and rebuilds because it is in the log."""
    register(client, "alice", "implementer")
    register(client, "bob", "reviewer")
    agents = {a["name"]: a for a in client.call("agent.list")["agents"]}
    assert agents["bob"]["last_seen_at"] == "" and agents["bob"]["status"] == "offline"  # registered, never seen
    sent = client.call("message.send", {"caller": "alice", "content": "hi", "to": ["@bob"]})
    agents = {a["name"]: a for a in client.call("agent.list")["agents"]}
    assert agents["alice"]["last_seen_at"] == sent["created_at"] and agents["alice"]["status"] == "active"
    client.close()
    lifecycle.stop(daemon)
    lifecycle.start(daemon)
    again = RawClient(daemon)
    try:
        after = {a["name"]: a for a in again.call("agent.list")["agents"]}
        assert {n: a["last_seen_at"] for n, a in after.items()} == {n: a["last_seen_at"] for n, a in agents.items()}
    finally:
        again.close()


# --------------------------------------------------------------------------- own messages


def test_ones_own_messages_are_never_unread_to_oneself(client):
    register(client, "alice", "implementer")
    register(client, "bob", "reviewer")
    mine = [
        client.call("message.send", {"caller": "alice", "content": f"deploy {i}", "to": ["@everyone"]})["message_id"]
        for i in range(2)
    ]
    theirs = client.call("message.send", {"caller": "bob", "content": "thanks", "to": ["@everyone"]})["message_id"]

    listed = client.call("message.list", {"caller": "alice"})
    assert listed["total"] == 3 and listed["unread"] == 1
    assert {m["message_id"]: m["is_read"] for m in listed["messages"]} == {mine[0]: True, mine[1]: True, theirs: False}
    # the MCP server's check_messages: explicit role and reader
    explicit = client.call("message.list", {"mention_role": "implementer", "unread_for_agent": "alice"})
    assert _ids(explicit) == [theirs] and explicit["unread"] == 1
    assert _ids(client.call("message.list", {"caller": "alice", "unread": True})) == [theirs]
    assert _ids(client.call("message.list", {"caller": "alice", "mentions": True, "unread": True})) == [theirs]
    assert client.call("message.counts", {"caller": "alice"}) == {"total": 1, "unread": 1}
    assert client.call("message.get", {"message_id": mine[0], "caller": "alice"})["message"]["is_read"] is True
    thread = client.call("message.thread", {"message_id": mine[0], "caller": "alice"})
    assert all(m["is_read"] for m in thread["messages"])
    assert client.call("message.markRead", {"caller": "alice", "all": True})["marked_count"] == 1
    assert client.call("message.list", {"caller": "alice"})["unread"] == 0
    assert client.call("message.markRead", {"caller": "alice", "message_ids": mine})["marked_count"] == 0
    assert client.call("message.markUnread", {"caller": "alice", "message_ids": mine})["marked_count"] == 0
    assert client.call("message.list", {"caller": "alice", "unread": True})["total"] == 0


def test_message_get_keeps_scopes_and_refs_in_the_order_given(shared, names):
    client = shared
    alice, bob, implementer, reviewer = _alice_and_bob(client, names)
    scopes = [
        {"type": "repo", "value": "github.com/user/repo"},
        {"type": "file", "value": "src/auth.go"},
        {"type": "feature", "value": "user-authentication"},
    ]
    refs = [{"type": "ticket", "value": "JIRA-456"}, {"type": "commit", "value": "abc123"}]
    mid = client.call(
        "message.send", {"caller": alice, "content": "fixed", "scopes": scopes, "refs": refs, "to": [f"@{bob}"]}
    )["message_id"]
    got = client.call("message.get", {"message_id": mid})["message"]
    assert got["scopes"] == scopes
    assert got["refs"] == refs + [{"type": "mention", "value": bob}]
    listed = client.call("message.list", {"caller": bob, "author_id": alice})["messages"][0]
    assert listed["scopes"] == scopes

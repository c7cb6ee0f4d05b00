"""Parameter errors a client can act on (issue 30, item 11): every bad parameter is a
-32602 whose message starts with "invalid params:"."""

from __future__ import annotations

from daemon_helpers import register

from thrum.errors import INVALID_PARAMS


def test_a_bad_page_size_is_an_invalid_params_error(client):
    register(client, "alice", "implementer")
    for size in (0, 1000, "ten"):
        err = client.request("message.list", {"caller": "alice", "page_size": size})["error"]
        assert err["code"] == INVALID_PARAMS and err["message"].startswith("invalid params: page_size"), err


def test_mark_read_wants_a_list_of_ids_not_a_string(client):
    register(client, "alice", "implementer")
    register(client, "bob", "reviewer")
    mid = client.call("message.send", {"caller": "alice", "content": "hi", "to": ["@bob"]})["message_id"]
    for method in ("message.markRead", "message.markUnread", "message.archive"):
        err = client.request(method, {"caller": "bob", "message_ids": mid})["error"]
        assert err["code"] == INVALID_PARAMS and "message_ids must be a list" in err["message"], (method, err)
    assert client.call("message.markRead", {"caller": "bob", "message_ids": [mid]})["marked_count"] == 1


def test_adding_a_group_or_a_role_as_an_agent_says_what_it_is(client):
    register(client, "alice", "implementer")
    client.call("group.create", {"caller": "alice", "name": "g1"})
    client.call("group.create", {"caller": "alice", "name": "g2"})
    cases = {
        "g1": "a group cannot hold itself (@g1)",
        "@g2": "@g2 is a group; a group holds agents and roles",
        "implementer": "@implementer is a role; add it with --role implementer",
    }
    for member, says in cases.items():
        err = client.request("group.member.add", {"caller": "alice", "group": "g1", "member": member})["error"]
        assert err["code"] == INVALID_PARAMS and says in err["message"] and "did you mean" not in err["message"], err

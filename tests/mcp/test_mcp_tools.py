"""The tools through the official MCP client: schemas, every tool's happy path and errors."""

from __future__ import annotations

import jsonschema
import pytest

from mcp_helpers import WAIT, mcp_server, shared_mcp_server

import trio

TOOLS = {
    "send_message",
    "search_messages",
    "check_messages",
    "wait_for_message",
    "list_agents",
    "broadcast_message",
    "create_group",
    "delete_group",
    "add_group_member",
    "remove_group_member",
    "list_groups",
    "get_group",
    "acknowledge",
}


@pytest.fixture(scope="module")
def team(bus):
    """Agents of this module: tm_ann (implementer) serves; tm_ben, tm_cat (reviewers) and tm_dan write;
    tm_eve never does anything (any call as an agent counts as being seen)."""
    bus.register("tm_ann", "tm_impl", identity_file=True)
    bus.register("tm_ben", "tm_rev", identity_file=True)
    bus.register("tm_cat", "tm_rev", identity_file=True)
    bus.register("tm_dan", "tm_ops", identity_file=True)
    bus.register("tm_eve", "tm_idle", identity_file=True)
    return bus


@pytest.fixture(scope="module")
def ann(team):
    """tm_ann's server, shared by the tests of this module that call tools as tm_ann and need
    nothing of a fresh server (8 starts -> 1: ~0.7 s of CPU each)."""
    with shared_mcp_server(team.repo, "tm_ann") as server:
        yield server


async def test_tool_list_has_all_thirteen_with_input_and_output_schemas(team, ann):
    listed = (await ann.session.list_tools()).tools
    assert {t.name for t in listed} == TOOLS
    by_name = {t.name: t for t in listed}
    for tool in listed:
        assert tool.description, tool.name
        assert tool.input_schema["type"] == "object", tool.name
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
    send = by_name["send_message"]
    assert set(send.input_schema["required"]) == {"to", "content"}
    props = send.input_schema["properties"]
    assert set(props) == {"to", "content", "reply_to", "priority", "metadata"}
    assert props["priority"]["enum"] == ["critical", "high", "normal", "low"]
    assert set(send.output_schema["properties"]) >= {"status", "message_id", "recipient_status"}
    wait = by_name["wait_for_message"].input_schema["properties"]
    assert (wait["timeout"]["default"], wait["timeout"]["maximum"]) == (300, 600)
    assert wait["priority_filter"]["enum"] == ["all", "critical", "high_and_above", "normal_and_above"]
    assert by_name["check_messages"].input_schema["properties"]["limit"]["default"] == 50
    assert set(by_name["add_group_member"].input_schema["required"]) == {"group", "member_type", "member_id"}
    message = by_name["check_messages"].output_schema["$defs"]["MessageInfo"]["properties"]
    assert {"message_id", "from", "content", "priority", "timestamp"} <= set(message)
    assert by_name["list_groups"].annotations.read_only_hint is True


async def test_send_message_delivers_with_real_recipient_status(team, ann):
    out = await ann.call(
        "send_message",
        {"to": "@tm_ben", "content": "hi **ben**", "priority": "critical", "metadata": {"ticket": 42}},
    )
    assert out["status"] == "delivered" and out["message_id"].startswith("msg_")
    assert (await ann.call("send_message", {"to": "tm_eve", "content": "hi"}))[
        "recipient_status"
    ] == "offline"  # registered, never seen doing anything
    got = team.call("message.get", {"message_id": out["message_id"]})["message"]
    assert (got["author"]["agent_id"], got["body"]["content"], got["priority"]) == (
        "tm_ann",
        "hi **ben**",
        "critical",
    )
    assert got["body"]["structured"] == '{"ticket":42}'
    team.call("session.heartbeat", {"caller": "tm_cat"})
    assert (await ann.call("send_message", {"to": "tm_rev", "content": "role"}))["recipient_status"] == "active"
    assert (await ann.call("send_message", {"to": "agent:tm_idle:abc123", "content": "composite"}))[
        "recipient_status"
    ] == "offline"
    team.call("group.create", {"caller": "tm_dan", "name": "tm_empty"})
    assert (await ann.call("send_message", {"to": "@tm_empty", "content": "nobody"}))["recipient_status"] == "known"
    reply = await ann.call("send_message", {"to": "@tm_ben", "content": "again", "reply_to": out["message_id"]})
    assert reply["thread_id"] == out["thread_id"]


async def test_send_message_to_a_role_nobody_holds_yet_waits_for_its_first_holder(team, ann):
    out = await ann.call("send_message", {"to": "@tm_future", "content": "for whoever comes"})
    assert out["recipient_status"] == "known"
    assert out["note"] == "nobody holds the role @tm_future yet; the message waits for its first holder"
    team.register("tm_fay", "tm_future")
    got = team.call("message.list", {"caller": "tm_fay", "mentions": True, "unread": True})["messages"]
    assert [m["message_id"] for m in got] == [out["message_id"]]


async def test_send_message_errors_are_one_line_and_name_close_matches(team, ann):
    assert "unknown recipient '@tm_bne'" in (err := await ann.fail("send_message", {"to": "@tm_bne", "content": "x"}))
    assert "@tm_ben" in err
    assert "invalid priority" in await ann.fail("send_message", {"to": "tm_ben", "content": "x", "priority": "urgent"})
    assert "missing required argument content" in await ann.fail("send_message", {"to": "tm_ben"})
    assert "to is empty" in await ann.fail("send_message", {"to": "@", "content": "x"})
    assert "not found" in await ann.fail(
        "send_message", {"to": "tm_ben", "content": "x", "reply_to": "msg_01J0000000000000000000000Z"}
    )


async def test_check_messages_returns_my_unread_mentions_never_my_own_and_counts_exactly(team):
    team.register("ck_me", "ck_role", identity_file=True)
    team.register("ck_peer", "ck_role", identity_file=True)
    team.call("group.create", {"caller": "ck_peer", "name": "ck_team"})
    team.call("group.member.add", {"caller": "ck_peer", "group": "ck_team", "member": "ck_me"})
    ids = [
        team.send("tm_ben", "by name", to=["ck_me"])["message_id"],
        team.send("tm_ben", "by role", to=["ck_role"])["message_id"],
        team.send("tm_ben", "by group", to=["ck_team"])["message_id"],
        team.send("tm_ben", "to everyone", to=["everyone"])["message_id"],
    ]
    team.send("tm_ben", "to someone else", to=["tm_cat"])
    team.send("ck_me", "my own, to my role", to=["ck_role"])
    team.send("ck_me", "my own, to everyone", to=["everyone"])
    # everything sent to @everyone before this test also reaches ck_me: read it first
    team.call("message.markRead", {"caller": "ck_me", "all": True, "mentions": True})
    ids.append(team.send("tm_dan", "one more by name", to=["ck_me"])["message_id"])
    team.call("message.markUnread", {"caller": "ck_me", "message_ids": ids[:4]})
    async with mcp_server(team.repo, "ck_me") as me:
        first = await me.call("check_messages", {"limit": 2})
        assert first["status"] == "messages"
        assert [m["message_id"] for m in first["messages"]] == ids[:2]  # oldest first
        assert first["remaining"] == 3
        assert first["messages"][0]["from"] == "tm_ben" and first["messages"][0]["to"] == ["@ck_me"]
        rest = await me.call("check_messages")
        assert [m["message_id"] for m in rest["messages"]] == ids[2:]
        assert rest["remaining"] == 0
        assert await me.call("check_messages") == {"status": "empty", "messages": [], "remaining": 0}
        assert "invalid limit" in await me.fail("check_messages", {"limit": 0})


async def test_check_messages_pages_past_one_hundred(team):
    team.register("pg_me", "pg_role", identity_file=True)
    team.call("message.markRead", {"caller": "pg_me", "all": True})
    for i in range(130):
        team.send("tm_ben", f"n{i}", to=["pg_me"])
    async with mcp_server(team.repo, "pg_me") as me:
        big = await me.call("check_messages", {"limit": 120})
        assert [m["content"] for m in big["messages"]] == [f"n{i}" for i in range(120)]
        assert big["remaining"] == 10
        assert len((await me.call("check_messages", {"limit": 1000}))["messages"]) == 10


async def test_search_messages_finds_what_the_agent_can_see_with_snippets_and_marks_nothing(team):
    team.register("sr_me", "sr_role", identity_file=True)
    hit = team.send("tm_ben", "the zanzibar_config loader fails on empty files", to=["sr_me"])["message_id"]
    other = team.send("tm_cat", "zanzibar weather is fine", to=["sr_me"])["message_id"]
    archived = team.send("tm_ben", "zanzibar notes, archived", to=["sr_me"])["message_id"]
    team.call("message.archive", {"caller": "sr_me", "message_ids": [archived]})
    async with mcp_server(team.repo, "sr_me") as me:
        out = await me.call("search_messages", {"query": "zanzibar_config"})
        assert out["status"] == "results" and out["total"] == 1 and out["total_pages"] == 1
        first = out["messages"][0]
        assert (first["message_id"], first["from"]) == (hit, "tm_ben")
        assert first["content"] == "the zanzibar_config loader fails on empty files"
        assert first["snippet"] == "the «zanzibar_config» loader fails on empty files" and first["score"] > 0
        assert {r["message_id"] for r in (await me.call("search_messages", {"query": "zanzibar"}))["messages"]} == {
            hit,
            other,
        }
        assert [
            r["message_id"] for r in (await me.call("search_messages", {"query": "zanzibar is:archived"}))["messages"]
        ] == [archived]
        paged = await me.call("search_messages", {"query": "zanzibar", "limit": 1, "page": 2})
        assert (len(paged["messages"]), paged["total"], paged["total_pages"]) == (1, 2, 2)
        assert (await me.call("search_messages", {"query": "nothing-like-it"}))["status"] == "empty"
        error = await me.fail("search_messages", {"query": 'from:tm_ben "open'})
        assert error.endswith('invalid query: unbalanced quote: the " at character 13 is never closed')
    unread = team.call("message.list", {"caller": "sr_me", "unread": True, "page_size": 100})
    assert {hit, other} <= {m["message_id"] for m in unread["messages"]}  # searching read nothing


async def test_list_agents_reports_status_and_filters_offline(team, ann):
    everyone = await ann.call("list_agents")
    assert everyone["count"] == len(everyone["agents"])
    by_name = {a["name"]: a for a in everyone["agents"]}
    assert by_name["tm_ann"]["status"] == "active"  # its own server heartbeats
    assert by_name["tm_eve"] == {
        "name": "tm_eve",
        "role": "tm_idle",
        "module": "core",
        "status": "offline",
        "last_seen_at": "",
    }
    active = await ann.call("list_agents", {"include_offline": False})
    assert "tm_ann" in {a["name"] for a in active["agents"]}
    assert all(a["status"] == "active" for a in active["agents"])
    assert "tm_eve" not in {a["name"] for a in active["agents"]}
    # a flag is a boolean, not a word that looks like one (issue 30, item 11)
    assert "include_offline" in await ann.fail("list_agents", {"include_offline": "yes"})


async def test_broadcast_excludes_the_sender_and_applies_the_filter(team, ann):
    agents = [a["name"] for a in team.call("agent.list")["agents"]]
    everyone = await ann.call("broadcast_message", {"content": "standup in 5"})
    assert everyone["status"] == "sent"
    assert sorted(everyone["sent_to"]) == sorted(a for a in agents if a != "tm_ann")
    assert everyone["total_sent"] == len(agents) - 1 and len(everyone["message_ids"]) == 1
    got = team.call("message.get", {"message_id": everyone["message_ids"][0]})["message"]
    assert got["refs"] == [{"type": "mention", "value": "everyone"}]

    narrowed = await ann.call(
        "broadcast_message",
        {"content": "reviewers and ops but dan", "priority": "high", "filter": {"exclude": ["@tm_dan", "tm_impl"]}},
    )
    assert "tm_ann" not in narrowed["sent_to"] and "tm_dan" not in narrowed["sent_to"]
    assert {"tm_ben", "tm_cat"} <= set(narrowed["sent_to"])
    got = team.call("message.get", {"message_id": narrowed["message_ids"][0]})["message"]
    assert {r["value"] for r in got["refs"]} == set(narrowed["sent_to"]) and got["priority"] == "high"

    team.call("session.heartbeat", {"caller": "tm_ben"})
    active = await ann.call(
        "broadcast_message", {"content": "who is here?", "filter": {"status": "active", "exclude": ["tm_cat"]}}
    )
    assert "tm_ben" in active["sent_to"] and "tm_eve" not in active["sent_to"] and "tm_cat" not in active["sent_to"]

    nobody = await ann.call("broadcast_message", {"content": "x", "filter": {"exclude": agents}})
    assert nobody == {"status": "no_recipients", "sent_to": [], "failed_to": [], "total_sent": 0, "message_ids": []}
    assert "invalid filter.status" in await ann.fail(
        "broadcast_message", {"content": "x", "filter": {"status": "busy"}}
    )


async def test_group_tools_happy_paths_and_errors(team, ann):
    assert await ann.call("create_group", {"name": "tm_squad", "description": "the squad"}) == {
        "status": "created",
        "name": "tm_squad",
    }
    assert "already names a group" in await ann.fail("create_group", {"name": "tm_squad"})
    assert "already names an agent" in await ann.fail("create_group", {"name": "tm_ben"})
    assert await ann.call("add_group_member", {"group": "tm_squad", "member_type": "agent", "member_id": "tm_ben"}) == {
        "status": "added",
        "group": "tm_squad",
        "member_type": "agent",
        "member_id": "tm_ben",
    }
    await ann.call("add_group_member", {"group": "@tm_squad", "member_type": "role", "member_id": "tm_ops"})
    err = await ann.fail("add_group_member", {"group": "tm_squad", "member_type": "agent", "member_id": "tm_bem"})
    assert "agent @tm_bem not found" in err and "@tm_ben" in err and 'member_type "role"' in err
    assert "invalid member_type" in await ann.fail(
        "add_group_member", {"group": "tm_squad", "member_type": "team", "member_id": "x"}
    )
    assert "not found" in await ann.fail(
        "add_group_member", {"group": "tm_nope", "member_type": "agent", "member_id": "tm_ben"}
    )

    groups = {g["name"]: g for g in (await ann.call("list_groups"))["groups"]}
    assert groups["tm_squad"]["member_count"] == 2 and groups["tm_squad"]["created_by"] == "tm_ann"
    assert groups["tm_squad"]["description"] == "the squad" and groups["tm_squad"]["created_at"]
    assert groups["everyone"]["member_count"] == len(team.call("agent.list")["agents"])

    plain = await ann.call("get_group", {"name": "tm_squad"})
    assert plain["members"] == [{"type": "agent", "id": "tm_ben"}, {"type": "role", "id": "tm_ops"}]
    assert plain["created_by"] == "tm_ann"
    # spec: expanded_agents and expanded_agents_count are present only with expand=true
    assert "expanded_agents" not in plain and "expanded_agents_count" not in plain
    expanded = await ann.call("get_group", {"name": "tm_squad", "expand": True})
    assert expanded["expanded_agents"] == ["tm_ben", "tm_dan"] and expanded["expanded_agents_count"] == 2
    schema = next(t for t in (await ann.session.list_tools()).tools if t.name == "get_group").output_schema
    assert not {"expanded_agents", "expanded_agents_count"} & set(schema["required"])
    assert schema["properties"]["expanded_agents"]["type"] == "array"  # never null when present
    assert schema["properties"]["expanded_agents_count"]["type"] == "integer"
    for result in (plain, expanded):
        jsonschema.validate(result, schema)
    assert "not found" in await ann.fail("get_group", {"name": "tm_nope"})

    assert await ann.call(
        "remove_group_member", {"group": "tm_squad", "member_type": "role", "member_id": "tm_ops"}
    ) == {"status": "removed", "group": "tm_squad", "member_type": "role", "member_id": "tm_ops"}
    assert "is not a member" in await ann.fail(
        "remove_group_member", {"group": "tm_squad", "member_type": "role", "member_id": "tm_ops"}
    )
    assert await ann.call("delete_group", {"name": "tm_squad"}) == {"status": "deleted", "name": "tm_squad"}
    assert "not found" in await ann.fail("delete_group", {"name": "tm_squad"})
    assert "cannot be deleted" in await ann.fail("delete_group", {"name": "everyone"})


async def test_wait_for_message_argument_errors(team, ann):
    assert "invalid timeout" in await ann.fail("wait_for_message", {"timeout": 601})
    assert "invalid priority_filter" in await ann.fail("wait_for_message", {"priority_filter": "urgent"})
    with trio.fail_after(WAIT):
        assert (await ann.call("wait_for_message", {"timeout": 0}))["status"] in ("timeout", "message_received")

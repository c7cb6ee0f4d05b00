"""Pure parts of the MCP server: addressing, presence, message shapes, argument errors,
host configuration, and the waiter's queue rules."""

from __future__ import annotations

import json
import shlex
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import trio
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ValidationError

from thrum.mcp import hostconfig
from thrum.mcp.server import argument_error
from thrum.mcp.convert import message_info, one_line, parse_address
from thrum.mcp.presence import agent_status, audience_status
from thrum.mcp.waiter import QUEUE_MAX, Waiter

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def _seen(seconds_ago: float) -> dict:
    at = NOW - timedelta(seconds=seconds_ago)
    return {"last_seen_at": at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"}


def test_parse_address_follows_the_spec_addressing():
    assert parse_address("@ops") == "ops"
    assert parse_address("ops") == "ops"
    assert parse_address(" @alice ") == "alice"
    assert parse_address("agent:ops:abc123") == "ops"
    with pytest.raises(ToolError):
        parse_address(" @ ")


def test_status_is_the_daemons_and_an_audience_is_as_lively_as_its_liveliest():
    assert agent_status({**_seen(500), "status": "active"}, NOW) == "active"  # the daemon's word wins
    # a daemon that does not say: the same one definition (thrum.presence), not one of MCP's own
    assert agent_status(_seen(119), NOW) == "active"
    assert agent_status(_seen(121), NOW) == "idle"
    assert agent_status(_seen(901), NOW) == "offline"
    assert agent_status({"last_seen_at": ""}, NOW) == "offline"
    assert agent_status({"last_seen_at": "garbage"}, NOW) == "offline"
    assert audience_status([], NOW) == "known"
    assert audience_status([_seen(500), _seen(5)], NOW) == "active"
    assert audience_status([_seen(500), _seen(1000)], NOW) == "idle"
    assert audience_status([_seen(1000)], NOW) == "offline"


def test_message_info_reads_list_items_and_get_results():
    item = {
        "message_id": "msg_1",
        "agent_id": "ann",
        "body": {"content": "hi", "structured": '{"k": 1}'},
        "priority": "high",
        "created_at": "2026-01-01T00:00:00.000Z",
        "thread_id": "thr_1",
        "refs": [{"type": "mention", "value": "ben"}, {"type": "reply_to", "value": "msg_0"}],
        "reply_to": "msg_0",
    }
    info = message_info(item).model_dump()
    assert info == {
        "message_id": "msg_1",
        "from": "ann",
        "content": "hi",
        "priority": "high",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "thread_id": "thr_1",
        "reply_to": "msg_0",
        "to": ["@ben"],
        "metadata": {"k": 1},
    }
    got = {"message_id": "msg_2", "author": {"agent_id": "cat"}, "body": {"content": "x", "structured": "[1]"}}
    assert message_info(got).model_dump()["from"] == "cat"
    assert message_info(got).model_dump()["metadata"] == {"value": [1]}


def test_errors_are_one_line_with_mcp_wording():
    assert one_line("a\n  b\n") == "a b"
    assert (
        one_line("agent @x not found (use --role to add a role)")
        == 'agent @x not found (use member_type "role" to add a role)'
    )

    class Args(BaseModel):
        timeout: int
        priority: str

    with pytest.raises(ValidationError) as info:
        Args.model_validate({"timeout": "soon"})
    text = argument_error("wait_for_message", info.value)
    assert "\n" not in text
    assert text.startswith("Error executing tool wait_for_message: invalid timeout")
    assert "missing required argument priority" in text


def test_host_configuration_uses_absolute_paths():
    repo = Path("/src/my app")
    exe = "/opt/venv/bin/thrum"
    config = json.loads(hostconfig.render("json", executable=exe, repo=repo, agent="ann"))
    assert config == {
        "mcpServers": {
            "thrum": {
                "type": "stdio",
                "command": exe,
                "args": ["mcp", "serve", "--repo", "/src/my app", "--agent-id", "ann"],
            }
        }
    }
    line = hostconfig.render("claude", executable=exe, repo=repo, agent="ann")
    assert shlex.split(line) == [
        "claude",
        "mcp",
        "add",
        "thrum",
        "--",
        exe,
        "mcp",
        "serve",
        "--repo",
        "/src/my app",
        "--agent-id",
        "ann",
    ]
    assert (
        "type"
        not in json.loads(hostconfig.render("cursor", executable=exe, repo=repo, agent="a"))["mcpServers"]["thrum"]
    )
    with pytest.raises(ValueError):
        hostconfig.render("vim", executable=exe, repo=repo, agent="a")
    assert Path(hostconfig.thrum_executable()).is_absolute()


class _Link:
    """Just enough of DaemonLink for the queue rules (no daemon involved)."""

    me = "me"

    def add_notification_handler(self, handler):
        self.handler = handler

    def add_connection_task(self, task):
        pass


def _create(mid: str, *, by: str = "you", priority: str = "normal", event: str = "01J0") -> tuple[str, dict]:
    return "message.create", {"message_id": mid, "agent_id": by, "priority": priority, "event_id": event + mid}


async def test_queue_keeps_new_messages_once_never_my_own_and_drops_the_oldest():
    w = Waiter(_Link(), started_at="2026-01-01T00:00:00.000Z")
    w.on_notification(*_create("m1"))
    w.on_notification(*_create("m1"))  # a replay of the same message
    w.on_notification(*_create("m2", by="me"))  # my own
    w.on_notification("thread.updated", {"thread_id": "t", "event_id": "zzz"})
    assert [i["message_id"] for i in w.queue] == ["m1"]
    assert w.last_event_id == "01J0m2"  # thread.updated does not move the resume point
    for n in range(QUEUE_MAX + 5):
        w.offer({"message_id": f"x{n}", "agent_id": "you"})
    assert len(w.queue) == QUEUE_MAX and w.queue[0]["message_id"] == "x5"
    w.on_notification("message.delete", {"message_id": "x5", "event_id": "01J1"})
    assert w.queue[0]["message_id"] == "x6"
    w.consumed(["x6", "x7"])
    assert w.queue[0]["message_id"] == "x8"
    assert not w.offer({"message_id": "x6", "agent_id": "you"})  # consumed by check_messages: never again


async def test_take_honours_the_priority_filter_and_keeps_the_rest_in_order():
    w = Waiter(_Link(), started_at="")
    for mid, prio in (("a", "low"), ("b", "normal"), ("c", "high"), ("d", "critical"), ("e", "low")):
        w.on_notification(*_create(mid, priority=prio))
    from thrum.mcp.waiter import ALLOWED

    assert w._take(ALLOWED["critical"])["message_id"] == "d"
    assert w._take(ALLOWED["high_and_above"])["message_id"] == "c"
    assert w._take(ALLOWED["critical"]) is None
    assert w._take(ALLOWED["normal_and_above"])["message_id"] == "b"
    assert [w._take(ALLOWED["all"])["message_id"] for _ in range(2)] == ["a", "e"]


async def test_resubscribe_is_requested_on_drops_and_on_the_end_of_our_subscription_only():
    w = Waiter(_Link(), started_at="")
    w.subscription_id = 7
    w.on_notification("subscription.ended", {"subscription_id": 3})
    assert not w._resubscribe.is_set()
    w.on_notification("subscription.ended", {"subscription_id": 7})
    assert w._resubscribe.is_set()
    w2 = Waiter(_Link(), started_at="")
    w2.on_notification("notification.dropped", {"dropped": 3})
    assert w2._resubscribe.is_set()


class _Daemon:
    """Records the waiter's calls; subscriptions get ids 1, 2, ...; the unread inbox is ``unread``."""

    def __init__(self, unread: list[dict] | None = None):
        self.calls: list[tuple[str, dict]] = []
        self.unread = unread or []
        self.called = trio.Event()

    async def calls_made(self, n: int) -> None:
        """Return once ``n`` calls were made (fails after a few seconds)."""
        with trio.fail_after(5):
            while len(self.calls) < n:
                await self.called.wait()

    async def call(self, method: str, params: dict | None = None):
        self.calls.append((method, params or {}))
        self.called.set()
        self.called = trio.Event()
        if method == "subscribe.create":
            return {"subscription_id": sum(1 for m, _ in self.calls if m == "subscribe.create")}
        if method == "message.list":
            return {"messages": self.unread}
        return {}


async def test_after_a_drop_the_waiter_resumes_from_before_the_gap_and_catches_up(nursery):
    daemon = _Daemon(unread=[{"message_id": "lost", "agent_id": "you", "created_at": "2026-01-01T00:00:01.000Z"}])
    w = Waiter(_Link(), started_at="2026-01-01T00:00:00.000Z")
    await nursery.start(w.connection_task, daemon)
    assert daemon.calls == [("subscribe.create", {"filter_type": "mention", "mention": "me", "caller": "me"})]
    w.on_notification(*_create("m1", event="01JA"))
    w.on_notification("notification.dropped", {"dropped": 2, "total_dropped": 2, "next_seq": 4})
    # read before the new subscription is made: after the gap, so the resume point stays before it
    w.on_notification(*_create("m4", event="01JD"))
    w.on_notification("notification.dropped", {"dropped": 1, "total_dropped": 3, "next_seq": 6})
    w.on_notification(*_create("m6", event="01JF"))
    await daemon.calls_made(3)
    assert daemon.calls[1] == ("subscribe.delete", {"subscription_id": 1})  # first: it would crowd the replay out
    assert daemon.calls[2] == (
        "subscribe.create",
        {"filter_type": "mention", "mention": "me", "caller": "me", "since_event_id": "01JAm1"},
    )
    await daemon.calls_made(4)
    assert daemon.calls[3][0] == "message.list" and daemon.calls[3][1]["unread"]  # and the inbox, as a backstop
    assert [i["message_id"] for i in w.queue] == ["m1", "m4", "m6", "lost"]
    # a gap during the replay resumes from the same point: a replayed event is none
    w.on_notification(*_create("m2", event="01JB"))
    w.on_notification("notification.dropped", {"dropped": 1, "total_dropped": 4, "next_seq": 9})
    await daemon.calls_made(6)
    assert daemon.calls[4] == ("subscribe.delete", {"subscription_id": 2})
    assert daemon.calls[5][1]["since_event_id"] == "01JAm1"
    await daemon.calls_made(7)
    # once replayed, the next gap starts from the newest event seen by then
    w.on_notification("subscription.replayed", {"subscription_id": 3, "since_event_id": "01JAm1", "replayed": 2})
    w.on_notification(*_create("m7", event="01JG"))
    w.on_notification("notification.dropped", {"dropped": 1, "total_dropped": 5, "next_seq": 12})
    await daemon.calls_made(9)
    assert daemon.calls[8][1]["since_event_id"] == "01JGm7"


async def test_a_drop_before_any_event_was_seen_is_caught_up_from_the_inbox(nursery):
    daemon = _Daemon(unread=[{"message_id": "early", "agent_id": "you", "created_at": "2026-01-01T00:00:01.000Z"}])
    w = Waiter(_Link(), started_at="2026-01-01T00:00:00.000Z")
    await nursery.start(w.connection_task, daemon)
    w.on_notification("notification.dropped", {"dropped": 5, "total_dropped": 5, "next_seq": 6})
    await daemon.calls_made(4)
    assert "since_event_id" not in daemon.calls[1][1]  # nothing to resume from ...
    assert daemon.calls[3][0] == "message.list"  # ... so the unread inbox brings the lost message back
    assert [i["message_id"] for i in w.queue] == ["early"]

"""An agent whose key is revoked while its MCP server runs gets a tool error from
send_message, one line saying what happened and what to do; nothing is written in its name
(docs/design/trust.md)."""

from __future__ import annotations

from mcp_helpers import mcp_server, serve_refused

from thrum import events as ev


async def test_send_message_of_a_revoked_agent_is_a_tool_error(bus):
    bus.register("mr_amy", "mr_impl", identity_file=True)
    bus.register("mr_bob", "mr_rev", identity_file=True)
    async with mcp_server(bus.repo, "mr_amy") as amy:
        await amy.call("send_message", {"to": "@mr_bob", "content": "before"})
        bus.call("team.revoke", {"caller": "mr_amy", "name": "mr_amy", "from_event": ev.new_ulid()})
        err = await amy.fail("send_message", {"to": "@mr_bob", "content": "hello"})
    assert "revoked by mr_amy" in err and "nothing was written" in err, err
    assert "thrum team invite mr_amy" in err, err
    listed = bus.call("message.list", {"caller": "mr_bob"})
    assert [m["body"]["content"] for m in listed["messages"]] == ["before"]


def test_serving_as_a_revoked_agent_ends_the_start_up_with_what_happened(fresh):
    """The start-up's session is a write: refused for a retired key, its one line says so
    (not that a registration was refused: the agent is registered)."""
    d = fresh()
    d.register("mr_cy", "mr_impl", identity_file=True)
    d.call("team.revoke", {"caller": "mr_cy", "name": "mr_cy", "from_event": ev.new_ulid()})
    line = serve_refused(d.repo, "mr_cy")
    assert line.startswith("thrum: cannot serve as @mr_cy: agent 'mr_cy' may not write: its key "), line
    assert "revoked by mr_cy" in line and "refused to register" not in line, line

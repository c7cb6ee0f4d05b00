"""Gas City mailboxes as MCP agents see them (issue 30, item 9): the per-machine agents
that act for a mailbox (gcr_*, gck_*) are hidden; each mailbox shows once by its Gas
City name, and a broadcast never names them."""

from __future__ import annotations

from mcp_helpers import mcp_server

from thrum.gcmail import addresses


async def test_list_agents_and_broadcast_hide_the_mailbox_agents(bus):
    bus.register("mb_ann", "dev", identity_file=True)
    bus.register("mb_bob", "dev")
    box = addresses.mailbox("mayor")
    for tag in ("aaaaaaaa", "bbbbbbbb"):  # the mayor's agents on two machines, and a clerk
        bus.register(addresses.agent(box, tag), "gc", module=box)
    bus.register(addresses.agent(box, "aaaaaaaa", clerk=True), "gc", module=box)
    async with mcp_server(bus.repo, "mb_ann") as ann:
        listed = await ann.call("list_agents")
        names = [a["name"] for a in listed["agents"]]
        assert not any(n.startswith(("gcr_", "gck_")) for n in names), names
        assert names.count("mayor") == 1 and {"mb_ann", "mb_bob"} <= set(names), names
        sent = await ann.call("broadcast_message", {"content": "standup"})
        assert sent["sent_to"] == ["mb_bob"], sent

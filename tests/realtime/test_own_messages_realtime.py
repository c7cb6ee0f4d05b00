"""One's own message is never unread to oneself, in subscriptions too (issue 9): an
agent's mention subscription does not deliver what it sent to @everyone."""

from __future__ import annotations

import asyncio

from realtime_helpers import is_create_of


def test_a_mention_subscription_skips_the_subscribers_own_messages(shared):
    d = shared
    d.register("own_alice", "own_implementer")
    d.register("own_bob", "own_reviewer")

    async def go():
        c = await d.ws()
        await c.call("subscribe.create", {"filter_type": "mention", "mention": "own_alice", "caller": "own_alice"})
        mine = d.send("own_alice", "deploy done", to=["@everyone"])
        theirs = d.send("own_bob", "thanks", to=["@everyone"])
        notes = await c.until(is_create_of(theirs["message_id"]))
        await c.close()
        return mine, notes

    mine, notes = asyncio.run(go())
    delivered = [n["params"]["message_id"] for n in notes if n["method"] == "message.create"]
    assert mine["message_id"] not in delivered

"""Every notification has its own event_id (issue 9): a client that de-duplicates by
event_id, as spec/events.md advises, must not drop a thread.updated as a repeat of
the message.create that caused it."""

from __future__ import annotations

import asyncio


def test_thread_updated_has_an_event_id_of_its_own(shared):
    d = shared
    d.register("nid_alice", "nid_implementer")
    scope = {"type": "notification-ids", "value": "one"}

    async def go():
        c = await d.ws()
        await c.call("subscribe.create", {"filter_type": "scope", "scope": scope})
        sent = d.send("nid_alice", "first", scopes=[scope])
        notes = await c.until(lambda n: n["method"] == "thread.updated")
        await c.close()
        return sent, notes

    sent, notes = asyncio.run(go())
    create = next(n["params"] for n in notes if n["method"] == "message.create")
    update = next(n["params"] for n in notes if n["method"] == "thread.updated")
    assert create["message_id"] == sent["message_id"]
    assert update["event_id"] != create["event_id"]
    assert update["cause_event_id"] == create["event_id"]
    assert update["event_id"] > create["event_id"]  # a ULID made after the event it reports
    seen = {n["params"]["event_id"] for n in notes if "event_id" in n["params"]}
    assert len(seen) == len([n for n in notes if "event_id" in n["params"]])

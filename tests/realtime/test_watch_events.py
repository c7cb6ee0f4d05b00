"""What a watcher (the Web UI) needs pushed besides messages: read marks and group
changes reach `all` subscriptions, and only those."""

from __future__ import annotations

import asyncio


def test_read_marks_and_group_changes_reach_all_subscriptions_only(fresh):
    d = fresh()
    d.register("wa", "implementer")
    d.register("wb", "reviewer")

    async def go():
        everything, mentions = await d.ws(), await d.ws()
        await everything.call("subscribe.create", {"filter_type": "all"})
        await mentions.call("subscribe.create", {"filter_type": "mention", "mention": "wb"})
        mid = d.send("wa", "please look", to=["wb"])["message_id"]
        d.call("message.markRead", {"caller": "wb", "message_ids": [mid]})
        d.call("message.markUnread", {"caller": "wb", "message_ids": [mid]})
        d.call("message.archive", {"caller": "wb", "message_ids": [mid]})
        d.call("group.create", {"caller": "wa", "name": "wteam"})
        d.call("group.member.add", {"caller": "wa", "group": "wteam", "member": "wb"})
        d.call("group.member.remove", {"caller": "wa", "group": "wteam", "member": "wb"})
        d.call("group.delete", {"caller": "wa", "name": "wteam"})
        seen = await everything.until(lambda n: n["method"] == "group.delete")
        last = d.send("wa", "end", to=["wb"])["message_id"]
        filtered = await mentions.until(lambda n: n["method"] == "message.create" and n["params"]["message_id"] == last)
        await everything.close()
        await mentions.close()
        return mid, seen, filtered

    mid, seen, filtered = asyncio.run(go())
    by_method = {n["method"]: n["params"] for n in seen}
    for method in ("message.read", "message.unread", "message.archive"):
        assert by_method[method]["agent_id"] == "wb" and by_method[method]["message_ids"] == [mid], method
    for method in ("group.create", "group.member.add", "group.member.remove", "group.delete"):
        assert method in by_method, method
    assert by_method["group.member.add"]["member_value"] == "wb"
    assert {n["method"] for n in filtered} <= {"message.create", "thread.updated"}

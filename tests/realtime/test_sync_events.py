"""Events that arrive by sync reach subscribers exactly like local ones."""

from __future__ import annotations

import asyncio
from fixtures.repos.builders import make_replicas
from realtime_helpers import is_create_of, start_daemon

SYNCING = {"local_only": False, "sync_interval": 3600, "sync_debounce": 0}


def test_events_from_a_sync_reach_subscribers(tmp_path):
    pair = make_replicas(tmp_path, 2)
    a = start_daemon(tmp_path, SYNCING, repo=pair.a)
    b = start_daemon(tmp_path, SYNCING, repo=pair.b)
    try:
        scope = {"type": "module", "value": "synced"}

        async def go():
            scoped, everything = await b.ws(), await b.ws()
            await scoped.call("subscribe.create", {"filter_type": "scope", "scope": scope})
            await everything.call("subscribe.create", {"filter_type": "all"})
            a.register("remote_ann", "implementer")
            sent = a.send("remote_ann", "from the other machine", scopes=[scope])
            a.call("sync.run", timeout=60)
            b.call("sync.run", timeout=60)
            got = await scoped.until(is_create_of(sent["message_id"]))
            seen = await everything.until(is_create_of(sent["message_id"]))
            await scoped.close()
            await everything.close()
            return sent, got, seen

        sent, got, seen = asyncio.run(go())
        note = got[-1]["params"]
        assert note["agent_id"] == "remote_ann"
        assert note["body"]["content"] == "from the other machine"
        assert not note.get("replay")
        assert any(n["method"] == "agent.register" and n["params"]["agent_id"] == "remote_ann" for n in seen)
    finally:
        a.stop()
        b.stop()

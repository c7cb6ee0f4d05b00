"""Events that arrive by sync reach subscribers exactly like local ones."""

from __future__ import annotations

import asyncio
import json

from fixtures.repos.builders import make_replicas
from realtime_helpers import Daemon, is_create_of
from thrum.daemon import launcher


def _start(repo, monkeypatch) -> Daemon:
    paths = launcher.init_repo(repo, start_daemon=False)
    paths.config.write_text(json.dumps({"local_only": False, "ws_port": 0, "sync_interval": 3600,
                                        "sync_debounce": 0}))
    launcher.start(paths)
    return Daemon(paths, repo)


def test_events_from_a_sync_reach_subscribers(tmp_path, monkeypatch):
    monkeypatch.delenv("THRUM_LOCAL", raising=False)
    pair = make_replicas(tmp_path, 2)
    a = _start(pair.a, monkeypatch)
    b = _start(pair.b, monkeypatch)
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
        assert note["agent_id"] == "remote_ann" and note["body"]["content"] == "from the other machine"
        assert not note.get("replay")
        assert any(n["method"] == "agent.register" and n["params"]["agent_id"] == "remote_ann" for n in seen)
    finally:
        a.stop()
        b.stop()

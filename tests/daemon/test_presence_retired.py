"""A daemon writes no heartbeat of its own accord with a key it knows is retired: after an
agent revokes its key here, seeing the agent again writes nothing that every replica would
quarantine as ``revoked`` (and that would fail `thrum verify`)."""

from __future__ import annotations

import json
import time

from fixtures.repos.builders import make_repo
from fixtures.waiting import until
from thrum import events as ev
from thrum import lifecycle

from daemon_helpers import RawClient, register


def _heartbeats(paths, agent: str) -> list[dict]:
    out = []
    for f in (paths.main_repo / ".git" / "thrum-sync" / "a-sync").rglob("*.jsonl"):
        for line in f.read_bytes().splitlines():
            d = json.loads(line)
            if d.get("type") == "agent.heartbeat" and d.get("agent_id") == agent:
                out.append(d)
    return out


def test_no_heartbeat_is_written_with_a_revoked_key(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    make_repo(repo)
    monkeypatch.setenv("THRUM_LOCAL", "1")
    monkeypatch.setenv("THRUM_WS_PORT", "0")
    paths = lifecycle.init_repo(repo, start_daemon=False)
    paths.config.write_text(json.dumps({"local_only": True, "ws_port": 0, "presence_interval": 1}))
    lifecycle.start(paths)
    c = RawClient(paths)
    try:
        register(c, "alice", "implementer")
        register(c, "dave", "tester")
        time.sleep(1.2)  # dave's registration is older than the interval: seeing him makes one due
        c.call("message.list", {"caller": "dave"})
        c.call("agent.list", {})  # writes the heartbeats due
        until(lambda: len(_heartbeats(paths, "dave")) == 1, "dave's heartbeat")
        c.call("team.revoke", {"caller": "dave", "name": "dave", "from_event": ev.new_ulid()})
        time.sleep(1.2)
        c.call("message.list", {"caller": "dave"})
        c.call("agent.list", {})
        alice_before = len(_heartbeats(paths, "alice"))
        c.call("message.list", {"caller": "alice"})  # an agent whose key stands still gets one
        c.call("agent.list", {})
        until(lambda: len(_heartbeats(paths, "alice")) > alice_before, "alice's heartbeat")
        assert len(_heartbeats(paths, "dave")) == 1
    finally:
        c.close()
        lifecycle.stop(paths)

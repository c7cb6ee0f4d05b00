"""A session belongs to the agent whose key started it (issue 31, finding 4).

The attack: every message of alice carries her session id. An agent the pusher
registered by trust on first use pushes a signed ``agent.session.end`` naming that
id (her session ended everywhere, her live subscriptions cut), and a signed
``agent.session.start`` of the same id dated before hers (the session became the
attacker's, and alice's own writes under it were refused).
"""

from __future__ import annotations

import json
import socket
import time

from thrum import events as ev
from thrum.trust import keys

from hostile_helpers import events_file, forge, team_with_history


def _mallory(mallory, tmp_path):
    own = keys.LocalKeys(tmp_path / "mallory-keys")
    _, public = own.create("mallory")
    reg = ev.AgentRegister(agent_id="mallory", name="mallory", role="intruder", public_key=public.b64).to_dict()
    mallory.append(events_file(mallory), forge(reg, "mallory", tmp_path / "mallory-keys" / "mallory.key"))
    return tmp_path / "mallory-keys" / "mallory.key"


class _Subscriber:
    """A live subscription of alice's, on a raw socket of her daemon."""

    def __init__(self, m, agent: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(str(m.paths.socket))
        self.buf = b""
        params = {"filter_type": "mention", "mention": agent, "caller": agent}
        self.send({"jsonrpc": "2.0", "id": 1, "method": "subscribe.create", "params": params})
        self.sub = self.next(lambda x: x.get("id") == 1)["result"]

    def send(self, obj) -> None:
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def next(self, want, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                msg = json.loads(line)
                if want(msg):
                    return msg
            assert time.monotonic() < deadline, "nothing arrived"
            chunk = self.sock.recv(65536)
            assert chunk, "the daemon hung up"
            self.buf += chunk

    def close(self) -> None:
        self.sock.close()


def test_nobody_else_ends_or_claims_a_session(team, tmp_path):
    t, a, b = team_with_history(team)
    sid = a.rpc("session.heartbeat", {"caller": "alice"})["session_id"]  # alice at work: her session
    assert [s["session_id"] for s in a.rpc("session.list", {"agent": "alice", "active_only": True})["sessions"]] == [
        sid
    ]
    listener = _Subscriber(a, "alice")
    assert listener.sub["session_id"] == sid
    mallory = t.attacker()
    key = _mallory(mallory, tmp_path)
    end = ev.SessionEnd(session_id=sid, agent_id="mallory", reason="normal").to_dict()
    claim = dict(ev.SessionStart(session_id=sid, agent_id="mallory").to_dict(), event_id="0" * 26)
    claim["timestamp"] = "2000-01-01T00:00:00.000Z"
    for d in (end, claim):
        mallory.append(events_file(mallory), forge(d, "mallory", key))
    mallory.push()
    for m in (a, b):
        m.sync()
        active = m.rpc("session.list", {"agent": "alice", "active_only": True})["sessions"]
        assert sid in [s["session_id"] for s in active], m.name
    # alice writes under her session as before, and her subscription still delivers
    a.rpc("message.send", {"caller": "alice", "session_id": sid, "content": "still mine", "to": ["@bob"]})
    b.run("send", "are you there?", "--to", "@alice", agent="bob")
    b.sync()
    a.sync()
    note = listener.next(lambda x: x.get("method") in ("message.create", "subscription.ended"))
    assert note["method"] == "message.create" and "are you there?" in json.dumps(note)
    listener.close()

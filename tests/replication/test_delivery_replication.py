"""Delivery states across two machines and a bare remote: what B's agent saw, A's sender learns."""

from __future__ import annotations

import json
import subprocess

from replication_helpers import THRUM


def _hook(machine, agent: str) -> str:
    payload = json.dumps({"cwd": str(machine.path), "hook_event_name": "UserPromptSubmit", "prompt": "go on"})
    proc = subprocess.run(
        [THRUM, "hook", "claude", "UserPromptSubmit", "--agent", agent],
        input=payload,
        capture_output=True,
        text=True,
        cwd=machine.path,
        env=machine.env,
        timeout=60,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"] if proc.stdout.strip() else ""


def _bob(machine, mid: str) -> dict:
    msg = machine.json("message", "get", mid, "--peek", agent="alice")["message"]
    return {r["agent"]: r for r in msg["delivery"]}["bob"]


def test_a_message_sent_on_a_is_surfaced_on_b_and_a_sees_every_state(machines):
    a, b = machines(2)
    a.agent("alice", "lead")
    b.agent("bob", "dev")
    a.sync()
    b.sync()
    a.sync()
    mid = a.json("send", "Please review the migration", "--to", "@bob", "--ack-within", "1h", agent="alice")[
        "message_id"
    ]
    assert _bob(a, mid)["state"] == "sent"
    a.sync()
    b.sync()
    ctx = _hook(b, "bob")
    assert mid in ctx and "│ Please review the migration" in ctx and "ack requested" in ctx
    assert _hook(b, "bob") == ""  # shown once
    b.sync()
    a.sync()
    seen = _bob(a, mid)
    assert seen["state"] == "surfaced" and seen["delivered_at"] and seen["surfaced_at"]
    assert seen["delivered_at"] <= seen["surfaced_at"]
    unacked = a.json("sent", "--unacked", agent="alice")["messages"]
    assert [m["message_id"] for m in unacked] == [mid]
    b.run("message", "read", mid, agent="bob")
    b.sync()
    a.sync()
    assert _bob(a, mid)["state"] == "read"
    b.run("ack", mid, agent="bob")
    b.sync()
    a.sync()
    done = _bob(a, mid)
    assert done["state"] == "acked" and done["acked_at"] and done["read_at"]
    assert a.json("sent", "--unacked", agent="alice")["messages"] == []
    waited = a.json("wait", "--acked", mid, "--timeout", "5", agent="alice")
    assert waited["acked_by"] == ["bob"] and waited["timed_out"] is False
    assert a.shards() == b.shards()  # the receipts travelled like any event

"""Nobody locks an agent out of its own replica (issue 31, finding 3; issue 30, item 3;
issue 25, item 6).

The attack: an agent the pusher registered by trust on first use pushes one
``agent.cleanup`` for alice dated far in the future. Last-writer-wins by event id
made alice deleted on every replica for ever: her own daemon refused to act for
her, and no registration she could write sorted after the planted cleanup. A group's
membership could be pinned the same way.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest
from ulid import ULID

from fixtures.waiting import until
from thrum import events as ev
from thrum.trust import keys

from hostile_helpers import events_file, forge, team_with_history

FAR = datetime(2099, 1, 1, tzinfo=timezone.utc)
SKEW_S = 1  # the clock skew the held-event test allows


def _at(when: datetime) -> tuple[str, str]:
    """(event id, timestamp) of an event dated ``when``."""
    ms = int(when.timestamp() * 1000)
    ulid = str(ULID.from_int((ms << 80) | int.from_bytes(b"\x42" * 10, "big")))
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    return ulid, stamp


def _dated(when: datetime, etype: str, **fields) -> dict:
    """An event of ``etype`` dated ``when`` (its id and its timestamp)."""
    eid, stamp = _at(when)
    return {"type": etype, "timestamp": stamp, "event_id": eid, "v": 1, **fields}


def _mallory_registers(mallory, tmp_path, name: str = "mallory") -> object:
    """A newcomer the remote's pusher registers by trust on first use; its key file."""
    own = keys.LocalKeys(tmp_path / f"{name}-keys")
    private, public = own.create(name)
    reg = ev.AgentRegister(agent_id=name, name=name, role="intruder", public_key=public.b64).to_dict()
    rel = events_file(mallory)
    mallory.append(rel, forge(reg, name, tmp_path / f"{name}-keys" / f"{name}.key"))
    return tmp_path / f"{name}-keys" / f"{name}.key"


def _names(m) -> set[str]:
    return {a["name"] for a in m.json("agent", "list")["agents"]}


def test_a_far_future_cleanup_locks_nobody_out(team, tmp_path):
    t, a, b = team_with_history(team)
    mallory = t.attacker()
    key = _mallory_registers(mallory, tmp_path)
    cleanup = _dated(FAR, "agent.cleanup", agent_id="alice", reason="gone", method="manual", by="mallory")
    mallory.append(events_file(mallory), forge(cleanup, "mallory", key))
    mallory.push()
    for m in (a, b):
        m.sync()
        assert "alice" in _names(m)
        assert m.json("sync", "status")["quarantined_by_kind"].get("future") == 1
    # alice's own replica acts for her, and the rest of the team reaches her
    a.run("send", "still here", "--to", "@bob", agent="alice")
    b.run("send", "hello again", "--to", "@alice", agent="bob")
    b.sync()
    a.sync()
    assert "hello again" in {m["body"]["content"] for m in a.json("inbox", agent="alice")["messages"]}
    # a replica made after the attack holds the cleanup back too
    c = t.fresh_clone("c")
    assert "alice" in _names(c)
    assert c.json("sync", "status")["quarantined_by_kind"].get("future") == 1


def test_a_far_future_membership_change_pins_no_group(team, tmp_path):
    t, a, b = team_with_history(team)
    a.run("group", "create", "leads", agent="alice")
    a.run("group", "add", "leads", "@bob", agent="alice")
    a.sync()
    mallory = t.attacker()
    key = _mallory_registers(mallory, tmp_path)
    pin = _dated(
        FAR, "group.member.add", group="leads", member_type="agent", member_value="mallory", agent_id="mallory"
    )
    mallory.append(events_file(mallory), forge(pin, "mallory", key))
    mallory.push()
    b.sync()
    members = {m["value"] for m in b.json("group", "members", "leads")["members"]}
    assert members == {"bob"}
    b.run("group", "remove", "leads", "@bob", agent="bob")
    b.run("group", "add", "leads", "@bob", agent="bob")  # the group stays the team's to change


def test_an_event_a_little_ahead_is_held_until_its_time_comes(team, tmp_path):
    t, a, b = team_with_history(team)
    b.run("daemon", "stop")
    b.paths.config.write_text(json.dumps({"clock_skew": SKEW_S}))
    b.run("daemon", "start")
    mallory = t.attacker()
    key = _mallory_registers(mallory, tmp_path)
    pushed = []
    # A few seconds ahead: held when b's sync ends before the event is less than the skew
    # ahead. A machine too busy for that (load 18 has taken 6 s) makes it no test of holding:
    # then again, further ahead.
    for ahead in (4, 15):
        due = time.time() + ahead
        eid, stamp = _at(datetime.fromtimestamp(due, timezone.utc))
        early = dict(ev.SessionStart(agent_id="mallory").to_dict(), event_id=eid, timestamp=stamp)
        pushed.append(early["session_id"])
        mallory.append(events_file(mallory), forge(early, "mallory", key))
        mallory.push()
        b.sync()
        if time.time() < due - SKEW_S:
            break
    else:
        pytest.fail("the machine is too busy: no push and sync took less than 14 s")
    assert b.json("sync", "status")["quarantined_by_kind"].get("future") == 1
    until(
        lambda: not b.json("sync", "status")["quarantined_by_kind"].get("future"),
        "the daemon's timer to release the held event",
        timeout=60,
        every=0.2,
    )
    sessions = b.rpc("session.list", {"agent": "mallory"})["sessions"]
    assert sorted(s["session_id"] for s in sessions) == sorted(pushed)


def test_deleting_another_agent_needs_force_and_it_comes_back_when_it_acts(team):
    t, a, b = team_with_history(team)
    refused = a.run("agent", "delete", "bob", agent="alice", check=False)
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1 and "--force" in refused.stderr
    assert "bob" in _names(a)
    done = a.run("agent", "delete", "bob", "--force", agent="alice")
    assert "@bob" in done.stdout and "by @alice" in done.stdout
    gone = {x["name"]: x for x in a.json("agent", "list", "--all")["agents"]}["bob"]
    assert gone["deleted"] and gone["deleted_by"] == "alice"
    a.sync()
    b.sync()
    assert "bob" not in _names(b)
    # bob's own next action brings him back, here and on every replica
    b.run("send", "I am still here", "--to", "@alice", agent="bob")
    assert "bob" in _names(b)
    b.sync()
    a.sync()
    assert "bob" in _names(a)
    a.run("send", "welcome back", "--to", "@bob", agent="alice")
    a.sync()
    b.sync()
    assert "welcome back" in {m["body"]["content"] for m in b.json("inbox", agent="bob")["messages"]}


def test_a_heartbeat_brings_a_deleted_agent_back(team):
    t, a, b = team_with_history(team)
    a.run("agent", "delete", "bob", "--force", agent="alice")
    a.sync()
    b.sync()
    assert "bob" not in _names(b)
    b.rpc("session.heartbeat", {"caller": "bob"})
    assert "bob" in _names(b)

"""One name registered on two machines (issue 30, item 4).

`quickstart` fetches first when there is a remote and refuses a name another machine
took. When both register before either syncs (offline), the conflict is loud: each
replica refuses the other's lines, so `thrum sync` exits non-zero naming it, `doctor`
fails, `sync status` lists it, until the machine that registered later gives the name
up (README, "One name on two machines": tests/e2e/test_readme.py runs those steps).
"""

from __future__ import annotations


def test_quickstart_fetches_first_and_refuses_a_name_another_machine_took(machines):
    a, b = machines(2)
    a.agent("alice", "implementer")
    a.sync()
    r = b.run("quickstart", "--name", "alice", "--role", "reviewer", check=False)
    assert r.returncode == 1 and r.stdout == ""
    [line] = r.stderr.splitlines()
    assert "already registered from another machine" in line and "alice" in line
    assert not (b.path / ".thrum" / "identities" / "alice.json").exists()
    assert b.json("agent", "list")["agents"][0]["name"] == "alice"  # a's alice, fetched by the attempt


def _conflicted(machines):
    """alice registered on a and on b before either synced; each sends as alice."""
    a, b = machines(2)
    a.agent("alice", "implementer")
    b.agent("alice", "reviewer")  # nothing on the remote yet: the fetch finds no alice
    a.agent("carol", "tester")
    a.run("send", "from a", "--to", "@everyone", agent="alice")
    b.run("send", "from b", "--to", "@everyone", agent="alice")
    return a, b


def test_a_name_registered_on_two_machines_offline_makes_sync_and_doctor_fail(machines):
    a, b = _conflicted(machines)
    assert a.sync()["pushed"]  # the remote had nothing: no conflict seen yet
    second = b.run("sync", check=False)
    assert second.returncode == 1
    [line] = second.stderr.splitlines()
    assert line.startswith("thrum: name conflict: @alice ") and "another machine" in line, line
    assert "registered there first" in line  # a registered before b: b gives the name up
    third = a.run("sync", check=False)  # b pushed its lines all the same: now a sees b's alice
    assert third.returncode == 1 and "name conflict: @alice " in third.stderr
    assert "registered here first" in third.stderr

    for m in (a, b):
        doctor = m.run("doctor", check=False)
        assert doctor.returncode == 1
        [names] = [line for line in doctor.stdout.splitlines() if line.split()[1:2] == ["names"]]
        assert names.startswith("FAIL") and "@alice" in names, names
        [conflict] = m.json("sync", "status")["name_conflicts"]
        assert conflict["name"] == "alice" and conflict["open"] and conflict["local"]
        assert conflict["lines_refused"] >= 1
        assert "Conflicts:" in m.run("sync", "status").stdout

    # carol on a sees only a's alice; what b's alice said is refused, and the status says so
    texts = [m["body"]["content"] for m in a.json("inbox", agent="carol")["messages"]]
    assert texts == ["from a"]


def test_a_conflict_is_open_while_the_other_keys_lines_keep_arriving():
    from datetime import datetime, timedelta, timezone

    from thrum.trust.conflicts import ACTIVE_S, report

    now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)

    def at(seconds_ago: float) -> str:
        return (now - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    key = {"registered_at": at(7200), "lines": 3, "last_received_at": at(ACTIVE_S - 60)}
    ring = {"alice": {"keys": {"K" * 44: key}, "trusted": "T" * 44, "local": True}}
    [item] = report(ring, {"alice": at(9000)}, now)
    assert item["open"] and item["keeps_name"] == "here" and item["lines_refused"] == 3
    [later] = report(ring, {"alice": at(9000)}, now + timedelta(seconds=120))
    assert not later["open"]  # quiet for ACTIVE_S: reported, no longer failing anything
    assert report({"bob": {"keys": {}, "trusted": "T" * 44, "local": False}}, {}, now) == []  # b gave it up

"""What has not reached the remote, after restarts; offline syncs side by side (issue 30, items 6 and 7).

The pending count comes from the log against the remote's tip (what the last fetch or
push saw), never from a process's memory: a daemon that restarts, or `sync status`
with no daemon at all, still says how many lines wait to be pushed. Several `thrum
sync` runs with the daemon stopped (cron and a person) take turns and all succeed.
"""

from __future__ import annotations

import json
import subprocess

import pygit2
from replication_helpers import THRUM


def _break_remote(machine) -> str:
    repo = pygit2.Repository(str(machine.path))
    good = repo.remotes["origin"].url
    repo.remotes.set_url("origin", str(machine.path.parent / "gone.git"))
    return good


def test_pending_survives_a_daemon_restart_and_shows_with_the_daemon_stopped(machines):
    (a,) = machines(1)
    a.agent("alice", "implementer")
    assert a.sync()["pushed"]
    good = _break_remote(a)
    for n in range(3):
        a.run("send", f"unsent {n}", "--to", "@everyone", agent="alice")
    assert a.run("sync", check=False).returncode == 1
    assert a.json("sync", "status")["pending_events"] >= 3
    a.stop()
    offline = a.json("sync", "status")  # no daemon: counted from the log too
    assert offline["pending_events"] >= 3, offline  # the 3 messages (and the session's end at the stop)
    a.run("daemon", "start")
    status = a.json("sync", "status")
    assert status["pending_events"] >= offline["pending_events"], status
    doctor = json.loads(a.run("doctor", "--json", check=False).stdout)
    pending = next(c for c in doctor["checks"] if c["check"] == "pending")
    count = int(pending["detail"].split()[0])
    assert count >= offline["pending_events"] and "not pushed" in pending["detail"], pending
    pygit2.Repository(str(a.path)).remotes.set_url("origin", good)
    assert a.sync()["pushed"]
    assert a.json("sync", "status")["pending_events"] == 0


def test_overlapping_syncs_with_the_daemon_stopped_take_turns_and_all_succeed(machines):
    a, b = machines(2)
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    a.run("send", "hello from a", "--to", "@everyone", agent="alice")
    b.run("send", "hello from b", "--to", "@everyone", agent="bob")
    a.stop()
    b.stop()
    procs = [
        subprocess.Popen(
            [THRUM, "sync", "--quiet"], cwd=m.path, env=m.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for m in (a, a, a, b, b)
    ]
    outcomes = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert [code for code, _ in outcomes] == [0] * 5, outcomes
    assert not any("daemon started meanwhile" in err for _, err in outcomes), outcomes
    a.run("sync", "--quiet")
    contents = {m["body"]["content"] for m in a.json("inbox", agent="alice")["messages"]}
    assert "hello from b" in contents

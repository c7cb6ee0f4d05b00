"""`thrum doctor`: one line per check with what to do, --json, exit 1 when something
needs action; run against real daemons and a real smart-HTTP remote."""

from __future__ import annotations

import json

import pytest

http_only = pytest.mark.parametrize("remote_kind", ["http"], indirect=True)


def _doctor(machine, *args):
    proc = machine.run("doctor", "--json", *args, check=False)
    return proc.returncode, {c["check"]: c for c in json.loads(proc.stdout)["checks"]}


@http_only
def test_a_healthy_setup_passes_every_check_and_names_the_login_used(machines):
    a, b = machines(2)
    a.agent("alice", "implementer")
    a.sync()
    code, checks = _doctor(a)
    assert code == 0
    assert [c for c in checks.values() if c["status"] in ("warn", "fail")] == []
    expected = "state daemon socket worktree remote projection search names quarantine chains pending size maintenance"
    expected += " config"
    assert set(checks) == set(expected.split())
    assert "login: THRUM_GIT_TOKEN from the environment of `thrum doctor` (user alice)" in checks["remote"]["detail"]
    assert "a-sync at" in checks["remote"]["detail"]
    text = a.run("doctor").stdout.splitlines()
    assert len(text) == len(checks) and text[0].startswith("ok    daemon      running (pid ")


@http_only
def test_a_refused_login_fails_the_remote_check_with_what_to_do(machines):
    (a,) = machines(1)
    a.env = {**a.env, "THRUM_GIT_TOKEN": "wrong-token"}
    code, checks = _doctor(a)
    assert code == 1
    remote = checks["remote"]
    assert (
        remote["status"] == "fail"
        and "refused THRUM_GIT_TOKEN from the environment of `thrum doctor`" in remote["detail"]
    )
    assert "wrong-token" not in json.dumps(checks) and "git push" in remote["action"]
    line = next(x for x in a.run("doctor", check=False).stdout.splitlines() if " remote " in x)
    assert line.startswith("FAIL  remote      remote origin (http://127.0.0.1:") and "  -> fix the login" in line


def test_a_stopped_daemon_is_reported_and_the_git_checks_still_run(machines):
    (a,) = machines(1)
    a.stop()
    code, checks = _doctor(a)
    assert code == 1
    assert checks["daemon"]["status"] == "warn" and "thrum daemon start" in checks["daemon"]["action"]
    assert checks["worktree"]["status"] == "ok" and checks["remote"]["status"] == "ok"
    assert checks["projection"]["status"] == "skip"


def test_lines_the_database_has_not_read_and_quarantined_lines_are_reported(machines):
    (a,) = machines(1)
    a.agent("alice", "implementer")
    (a.worktree / "messages" / "zed").mkdir(parents=True, exist_ok=True)
    with open(a.worktree / "messages" / "zed" / "000001.jsonl", "ab") as f:  # written behind the daemon's back
        f.write(b"{this is not json\n")
    code, checks = _doctor(a)
    assert code == 1
    assert checks["projection"]["status"] == "warn"
    assert checks["projection"]["detail"].startswith("1 line(s) in 1 shard(s) are in the log but not in the database")
    assert "thrum daemon restart" in checks["projection"]["action"]
    a.run("daemon", "restart")  # catches up: the line is read and refused
    code, checks = _doctor(a)
    assert code == 0 and checks["projection"]["status"] == "ok"
    assert checks["quarantine"]["status"] == "info" and checks["quarantine"]["detail"].startswith("1 line(s) refused")

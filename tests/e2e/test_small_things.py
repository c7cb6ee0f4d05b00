"""Small things a new user trips over (issue 30, item 11), each through the installed CLI."""

from __future__ import annotations

import json
import subprocess


def test_unknown_config_keys_are_warned_about_and_fail_doctor(fresh):
    repo = fresh.init()
    repo.agent("alice", "implementer")
    config = repo.path / ".thrum" / "config.json"
    data = json.loads(config.read_text() or "{}") if config.exists() else {}
    data["sync_intervall"] = 5
    config.write_text(json.dumps(data))
    listed = repo.ok("agent", "list")
    assert "unknown key(s) in .thrum/config.json" in listed.err and "'sync_interval'" in listed.err
    doctor = repo.run("doctor", "--json")
    assert doctor.code == 1
    check = next(c for c in doctor.json()["checks"] if c["check"] == "config")
    assert check["status"] == "warn" and "sync_intervall" in check["detail"]


def test_the_cron_example_names_thrum_by_its_full_path(fresh):
    text = fresh.ok("sync", "--help").out
    cron = next(line for line in text.splitlines() if "* * * *" in line)
    assert "&& thrum sync" not in cron and "/thrum sync --quiet" in cron, cron


def test_quickstart_in_a_linked_worktree_needs_no_thrum_name(fresh):
    repo = fresh.init()
    repo.agent("alice", "implementer")
    linked = repo.path.parent / "feature"
    subprocess.run(["git", "worktree", "add", "-q", str(linked)], cwd=repo.path, check=True, capture_output=True)
    repo.ok("init", "--non-interactive", cwd=linked)
    made = repo.ok("quickstart", "--name", "bob", "--role", "reviewer", cwd=linked)
    assert "THRUM_NAME" not in made.out + made.err, made.out
    assert repo.ok("whoami", "--json", cwd=linked).json()["name"] == "bob"
    assert repo.ok("whoami", "--json").json()["name"] == "alice"

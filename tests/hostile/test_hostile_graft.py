"""Lines grafted from another repository's log (issue 25, item 5). A second repository —
a fork of this one whose team wrote its own root — holds lines signed with alice's real
key (the same agent on both teams). The attacker copies them into this team's ``a-sync``
with plain git. They verify against alice's key, but they were signed for another log:
every honest replica with the root, a fresh clone made after the attack included,
quarantines them as ``foreign-log``, and ``thrum verify`` refuses the push."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from fixtures.repos.builders import clone, make_replicas
from hostile_helpers import GIT_ENV
from replication_helpers import THRUM, Machine, machine_env

pytestmark = pytest.mark.long_file  # minutes on a loaded machine: started first


def git(machine, *args: str) -> str:
    env = {**os.environ, **GIT_ENV, "HOME": str(machine.path.parent)}
    return subprocess.run(
        ["git", *args], cwd=machine.path, env=env, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def _adopt_root(m) -> str:
    made = m.json("team", "init")
    git(m, "add", "thrum-team.toml")
    git(m, "commit", "-q", "-m", "team root")
    git(m, "push", "-q", "origin", "main")
    return made["log_id"]


def _contents(m, agent):
    listed = m.rpc("message.list", {"caller": agent, "page_size": 100})["messages"]
    return {x["body"]["content"] for x in listed}


def test_lines_grafted_from_another_log_are_quarantined_everywhere(team, tmp_path):
    t = team(2)
    a, b = t.machines
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    a.sync()
    b.sync()
    a.sync()  # the root adopts the agents a knows (issue 25 admission): bob too
    log_id = _adopt_root(a)
    git(b, "pull", "-q", "--ff-only", "origin", "main")
    a.sync()
    a.run("send", "to my team", "--to", "@bob", agent="alice")
    a.sync()
    b.sync()

    # the other log: a fork of this repository with its own root, where alice also writes
    other = make_replicas(tmp_path / "other", 1)
    d = Machine(other.clones[0], machine_env()).init()
    t.machines.append(d)
    d.adopt_identity(a, "alice")
    d.agent("dave", "reviewer")
    other_log = _adopt_root(d)
    assert other_log != log_id
    d.sync()  # the daemon reads the root again before each sync (and every few seconds)
    d.run("send", "for the other team only", "--to", "@dave", agent="alice")
    d.sync()
    grafted = [
        line
        for data in d.shards().values()
        for line in data.splitlines()
        if json.loads(line).get("type") == "message.create" and json.loads(line)["agent_id"] == "alice"
    ]
    assert grafted and all(other_log.encode() in line for line in grafted)

    mallory = t.attacker()
    before = mallory._git("rev-parse", "HEAD").strip()
    rel = mallory.file_of("messages", "alice")
    for line in grafted:
        mallory.append(rel, line)
    mallory.push("graft")
    after = mallory._git("rev-parse", "HEAD").strip()

    clone(t.remote, t.base / "carol")
    c = Machine(t.base / "carol", machine_env()).init()
    t.machines.append(c)
    for m in (a, b, c):
        m.sync()
        status = m.json("sync", "status")
        assert status["quarantined_by_kind"].get("foreign-log") == len(grafted), status["quarantined_by_kind"]
        assert "for the other team only" not in _contents(m, "bob")
        assert "to my team" in _contents(m, "bob")

    out = subprocess.run(
        [THRUM, "verify", "--repo", str(t.remote), "--from", before, "--to", after],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=a.path,
    )
    assert out.returncode == 1
    assert [line.split(": ")[1] for line in out.stdout.splitlines()] == ["foreign-log"] * len(grafted)

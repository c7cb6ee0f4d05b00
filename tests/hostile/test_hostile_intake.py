"""A compressible push (issue 31, finding 9, the sync's side): a few KB on the wire that
inflate to what one sync would read, write into the worktree and hand to the fold. The
victim's bound on what one sync takes in (``max_sync_intake_bytes``) is set low here so
the test stays small; the default (256 MiB) stops the issue's 600 MiB push the same way.
The attacker is plain git; the victims are real daemons driven through the installed CLI."""

from __future__ import annotations

from hostile_helpers import team_with_history
from thrum import config as config_mod

MiB = 2**20


def _junk_line(n: int, size: int) -> bytes:
    """One JSON line of ``size`` bytes that zlib squeezes to almost nothing."""
    head = b'{"event_id": "01JZZZZZZZZZZZZZZZZZZZZ%03d", "type": "message.create", "body": "' % n
    return head + b"A" * (size - len(head) - 3) + b'"}\n'


def test_a_compressible_push_is_refused_before_it_is_read_or_written(team):
    t, a, b = team_with_history(team)
    config_mod.save(a.paths.config, {"max_sync_intake_bytes": 4 * MiB})
    a.run("daemon", "restart")
    before = a.shards()
    mallory = t.attacker()
    mallory.pull()
    for n in range(10):  # 10 MiB of log files; a few KB pushed
        mallory.write(f"messages/mallory/{n + 1:06d}.jsonl", _junk_line(n, 1 * MiB))
    mallory.push()

    a.run("send", "written while the bomb waits", "--to", "@bob", agent="alice")
    proc = a.run("sync", check=False)
    assert proc.returncode != 0
    (line,) = proc.stderr.strip().splitlines()
    assert "remote origin" in line and "10.0 MiB" in line and "max_sync_intake_bytes" in line, line
    after = a.shards()
    assert not any(rel.startswith("messages/mallory/") for rel in after)  # nothing written
    assert all(after[rel].startswith(data) for rel, data in before.items())  # ours only grew
    status = a.json("sync", "status")
    assert "max_sync_intake_bytes" in status["last_error"] and status["pending_events"] >= 1

    mallory.pull()  # the team repairs the remote: the junk goes
    mallory.remove("messages/mallory")
    mallory.push("repaired")
    a.sync()
    b.sync()
    contents = [m["body"]["content"] for m in b.json("inbox", agent="bob")["messages"]]
    assert "written while the bomb waits" in contents


def test_the_bound_counts_what_a_sync_brings_not_the_history(team):
    """Many syncs of honest traffic, each well under the bound, however large the log grows."""
    t, a, b = team_with_history(team)
    config_mod.save(a.paths.config, {"max_sync_intake_bytes": 192 * 1024})
    a.run("daemon", "restart")
    for round_ in range(6):  # ~300 KB of log in all, ~50 KB a round
        for i in range(4):
            b.run("send", f"round {round_} message {i} " + "x" * 12_000, "--to", "@alice", agent="bob")
        b.sync()
        a.sync()
    assert a.json("inbox", agent="alice")["total"] >= 25

"""A compressible push (issue 31, finding 9, the sync's side): a few KB on the wire that
inflate to what one sync would read, write into the worktree and hand to the fold. The
victim's bound on what one sync takes in (``max_sync_intake_bytes``) is set low here so
the test stays small; the default (256 MiB) stops the issue's 600 MiB push the same way.
The attacker is plain git; the victims are real daemons driven through the installed CLI."""

from __future__ import annotations

from hostile_helpers import team_with_history
from thrum import config as config_mod
from thrum.sync.trees import MAX_FILE_BYTES

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


def _inbox(machine, agent: str) -> list[str]:
    return [m["body"]["content"] for m in machine.json("inbox", agent=agent)["messages"]]


def test_a_segment_over_its_size_bound_refuses_the_tip_before_any_of_it_is_taken(team):
    """A log file over the size any honest segment reaches (a 64 KiB cap; one line of at
    most 16 MiB on its own) is judged by its object header alone: the tip that brings it
    is refused whole, as an oversized intake is, never taken in part (the rest merged and
    that file passed over)."""
    t, a, b = team_with_history(team)
    b.run("send", "honest news in the same tip", "--to", "@alice", agent="bob")
    b.sync()
    mallory = t.attacker()
    mallory.pull()
    mallory.write("messages/mallory/000001.jsonl", _junk_line(0, MAX_FILE_BYTES + MiB))  # a few KB pushed
    mallory.push()

    proc = a.run("sync", check=False)
    assert proc.returncode != 0
    (line,) = proc.stderr.strip().splitlines()
    assert "messages/mallory/000001.jsonl" in line and "17.0 MiB" in line and "16.0 MiB" in line, line
    assert "honest news in the same tip" not in _inbox(a, "alice")  # nothing of that tip was taken
    assert not (a.worktree / "messages" / "mallory").exists()

    mallory.pull()  # the team repairs the remote: the oversized file goes
    mallory.remove("messages/mallory")
    mallory.push("repaired")
    a.sync()
    assert "honest news in the same tip" in _inbox(a, "alice")


def test_refused_lines_past_the_row_bound_are_counted_once_when_their_file_is_read_again(team):
    """Past 10,000 rows a kind, refused lines are counted in one row per file and kind
    (thrum.store.issues); a file read again from its start (an offline sync merged into
    it, so the next daemon start folds it again) must recount those lines, not add them
    a second time."""
    from thrum.store.issues import ROWS_PER_KIND

    t, a, b = team_with_history(team)
    before = a.json("sync", "status")["quarantined"]
    n = ROWS_PER_KIND + 50
    mallory = t.attacker()
    mallory.pull()
    junk = "messages/mallory/000001.jsonl"
    mallory.write(junk, b"".join(b'{"junk": %d}\n' % i for i in range(n)))
    mallory.push()
    a.sync()
    assert a.json("sync", "status")["quarantined"] == before + n

    a.run("daemon", "stop")
    mallory.pull()
    mallory.append(junk, b'{"junk": "one more"}')
    mallory.push()
    a.run("sync")  # offline: merges into the junk file, which the daemon folds again from its start
    a.run("daemon", "start")
    assert a.json("sync", "status")["quarantined"] == before + n + 1

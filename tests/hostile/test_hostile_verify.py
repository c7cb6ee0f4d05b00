"""``thrum verify`` on the remote's side (issue 25, item 7): a range a replica would
quarantine any of, or that removes lines, fails with one line per bad line; honest pushes
pass; as a pre-receive hook in a bare repository it refuses the attacker's push."""

from __future__ import annotations

import json
import os
import stat
import subprocess

from thrum import events as ev

from hostile_helpers import forge
from replication_helpers import THRUM


def _verify(repo, *args, env=None):
    return subprocess.run(
        [THRUM, "verify", "--repo", str(repo), *args], capture_output=True, text=True, timeout=120, env=env
    )


def _tip(repo) -> str:
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "refs/heads/a-sync"], capture_output=True, text=True)
    return out.stdout.strip()


def _team(team):
    t = team(2)
    a, b = t.machines
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    a.sync()
    b.sync()
    a.run("send", "hello bob", "--to", "@bob", agent="alice")
    a.sync()
    b.run("send", "hello alice", "--to", "@alice", agent="bob")
    b.sync()
    return t, a, b


def test_honest_history_and_honest_pushes_verify(team):
    t, a, b = _team(team)
    whole = _verify(t.remote)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "0 bad" in whole.stderr
    before = _tip(t.remote)
    for i in range(3):
        a.run("send", f"more {i}", "--to", "@bob", agent="alice")
    a.sync()
    push = _verify(t.remote, "--from", before, "--to", _tip(t.remote), "--json")
    got = json.loads(push.stdout)
    assert push.returncode == 0 and got["ok"] and got["added"] >= 3 and got["removed"] == 0, got


def test_a_push_that_forges_grafts_or_removes_lines_fails_with_one_line_each(team, tmp_path):
    t, a, b = _team(team)
    before = _tip(t.remote)
    mallory = t.attacker()
    rel = mallory.file_of("messages", "alice")
    lines = mallory.lines(rel)
    victim = next(json.loads(x) for x in lines if json.loads(x).get("type") == "message.create")
    unsigned = {**victim, "event_id": ev.new_ulid(), "message_id": "msg_" + ev.new_ulid()}
    foreign = forge(  # a line of bob's, copied from another repository's log: signed for another log
        {
            "type": "message.read",
            "timestamp": ev.now_rfc3339(),
            "event_id": ev.new_ulid(),
            "v": 1,
            "agent_id": "bob",
            "message_ids": [victim["message_id"]],
            "chain": {"seq": 1, "log": "log_01JZZZZZZZZZZZZZZZZZZZZZZZ"},
        },
        "bob",
        b.paths.identities / "bob.key",
    )
    kept = [x for x in lines if json.loads(x).get("event_id") != victim["event_id"]]
    mallory.write(rel, b"".join(x + b"\n" for x in kept) + forge(unsigned, "alice", None))
    mallory.write("receipts/bob/000001.jsonl", foreign)
    mallory.append(rel, b'{"not": "an event"')
    mallory.push()
    out = _verify(t.remote, "--from", before, "--to", _tip(t.remote))
    assert out.returncode == 1
    bad = out.stdout.splitlines()
    kinds = sorted(line.split(": ")[1] for line in bad)
    assert kinds == ["malformed", "removed", "unsigned"], bad
    assert any(line.startswith(f"{rel}:") and "removes message.create " + victim["event_id"] in line for line in bad)
    assert "3 bad" in out.stderr


def test_as_a_pre_receive_hook_it_refuses_the_attackers_push(team):
    t, a, b = _team(team)
    hook = t.remote / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\n"
        "while read old new ref; do\n"
        '  [ "$ref" = refs/heads/a-sync ] || continue\n'
        f'  "{THRUM}" verify --repo . --from "$old" --to "$new" || exit 1\n'
        "done\n"
    )
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    before = _tip(t.remote)
    mallory = t.attacker()
    rel = mallory.file_of("messages", "alice")
    d = json.loads(mallory.lines(rel)[0])
    mallory.append(rel, forge({**d, "event_id": ev.new_ulid()}, "alice", None))
    try:
        mallory.push()
    except AssertionError as exc:
        assert "unsigned" in str(exc) and "pre-receive hook declined" in str(exc)
    else:
        raise AssertionError("the hook let an unsigned line in")
    assert _tip(t.remote) == before
    assert os.access(hook, os.X_OK)

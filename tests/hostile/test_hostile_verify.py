"""``thrum verify`` on the remote's side (issue 25, item 7): a range a replica would
quarantine any of, or that removes lines, fails with one line per bad line; honest pushes
pass; as a pre-receive hook in a bare repository it refuses the attacker's push."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

from thrum import events as ev
from thrum.trust import keys, signing

from hostile_helpers import adopt_root, events_file, forge, steal
from replication_helpers import THRUM


def _verify(repo, *args, env=None):
    return subprocess.run(
        [THRUM, "verify", "--repo", str(repo), *args], capture_output=True, text=True, timeout=120, env=env
    )


def _tip(repo) -> str:
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "refs/heads/a-sync"], capture_output=True, text=True)
    return out.stdout.strip()


def _exchange(t) -> None:
    a, b = t.machines
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    a.sync()
    b.sync()
    a.run("send", "hello bob", "--to", "@bob", agent="alice")
    a.sync()
    b.run("send", "hello alice", "--to", "@alice", agent="bob")
    b.sync()


def _team(team):
    """alice and bob, a message each way (a copy of the team, built once per run)."""
    t = team.prepared("verify-exchange", _exchange)
    a, b = t.machines
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
    foreign = forge(  # a line of bob's copied from another repository's log: without a root, a fork of bob's #1
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
    receipts = "receipts/bob/000001.jsonl"  # bob's heartbeat may be there already (presence): kept, the forgery added
    held = mallory.lines(receipts) if receipts in mallory.files() else []
    mallory.write(receipts, b"".join(x + b"\n" for x in held) + foreign)
    mallory.append(rel, b'{"not": "an event"')
    mallory.push()
    out = _verify(t.remote, "--from", before, "--to", _tip(t.remote))
    assert out.returncode == 1
    bad = out.stdout.splitlines()
    kinds = sorted(line.split(": ")[1] for line in bad)
    assert kinds == ["fork", "malformed", "removed", "unsigned"], bad
    assert any(line.startswith(f"{rel}:") and "removes message.create " + victim["event_id"] in line for line in bad)
    assert any(line.startswith(f"{receipts}:{len(held) + 1}: fork: bob #1 is held by two events") for line in bad)
    assert "4 bad" in out.stderr


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


def _chain_tip(mallory, name: str) -> dict:
    """``name``'s newest chained event on the remote (over all its files), as the attacker reads it."""
    best: dict = {}
    for rel in mallory.files():
        if not rel.endswith(".jsonl"):
            continue
        for d in mallory.events(rel):
            if (d.get("sig") or {}).get("by") == name and "chain" in d:
                if not best or d["chain"]["seq"] > best["chain"]["seq"]:
                    best = d
    assert best, f"no chained event of {name}"
    return best


def _message(name: str, key_file, content: str, chain: dict | None = None) -> bytes:
    private = keys.LocalKeys(key_file.parent).get(name)
    assert private is not None
    d = ev.MessageCreate(
        message_id=signing.new_message_id(private[1].tag),
        agent_id=name,
        session_id=ev.new_id("ses"),
        body=ev.Body(content),
    ).to_dict()
    if chain is not None:
        d["chain"] = chain
    return forge(d, name, key_file)


def _bad_kinds(out) -> list[str]:
    return sorted(line.split(": ")[1] for line in out.stdout.splitlines())


def test_verify_applies_the_teams_rules_as_every_replica_does(team, tmp_path):
    """Under a committed team root, `thrum verify` refuses what every replica quarantines:
    a registration nobody admitted, a member removing an agent or changing a group, a
    line signed with a key after its rotation, and one after its revocation."""
    t = team(2)
    a, b = t.machines
    a.agent("alice", "implementer")
    a.agent("dave", "tester")
    b.agent("bob", "reviewer")
    for m in (a, b, a):
        m.sync()
    adopt_root(t, a, b)
    a.run("group", "create", "reviewers", agent="alice")
    a.run("group", "add", "reviewers", "@bob", agent="alice")
    a.sync()
    b.sync()
    old_bob = steal(b, "bob", tmp_path)  # bob's laptop, before he rotates
    b.json("agent", "rotate-key", agent="bob")
    b.sync()
    new_bob = tmp_path / "bob-now" / "bob.key"
    new_bob.parent.mkdir()
    shutil.copy2(b.path / ".thrum" / "identities" / "bob.key", new_bob)
    dave = steal(a, "dave", tmp_path)
    a.run("team", "revoke", "dave", "--from", ev.new_ulid(), agent="alice")  # dave's lines so far stay valid
    a.sync()
    honest = _verify(t.remote)  # the whole history, root and all: nothing bad
    assert honest.returncode == 0, honest.stdout + honest.stderr
    before = _tip(t.remote)

    mallory = t.attacker()
    mallory.pull()
    rel = events_file(mallory)
    own = keys.LocalKeys(tmp_path / "mallory-keys")
    _, public = own.create("mallory")
    reg = ev.AgentRegister(agent_id="mallory", name="mallory", role="intruder", public_key=public.b64).to_dict()
    mallory.append(rel, forge(reg, "mallory", tmp_path / "mallory-keys" / "mallory.key"))
    mallory.append(rel, forge(ev.AgentCleanup(agent_id="alice", reason="bye", by="bob").to_dict(), "bob", new_bob))
    remove = ev.GroupMemberRemove(group="reviewers", member_value="bob", agent_id="bob").to_dict()
    mallory.append(rel, forge(remove, "bob", new_bob))
    mallory.write("messages/bob/000001.jsonl", _message("bob", old_bob, "the old key, after its rotation"))
    mallory.write("messages/dave/000001.jsonl", _message("dave", dave, "after the revocation"))
    mallory.push("mallory, bob's old laptop and dave's revoked key")

    out = _verify(t.remote, "--from", before, "--to", _tip(t.remote))
    assert out.returncode == 1, out.stdout + out.stderr
    assert _bad_kinds(out) == ["not-admitted", "not-authorized", "not-authorized", "revoked", "revoked"], out.stdout
    text = out.stdout
    assert f"{rel}:" in text and "mallory (key" in text and "not admitted by the team root" in text
    assert "bob may not remove alice: only an admin may" in text
    assert "bob may not change group reviewers" in text
    assert "messages/dave/000001.jsonl:1: revoked: message.create by dave signed with a key revoked by alice" in text
    assert "by bob signed with a key rotated to key" in text
    assert "5 bad" in out.stderr
    fresh = t.fresh_clone("c")  # a replica judging the same lines quarantines exactly those
    fresh.sync()
    seen = fresh.json("sync", "status")["quarantined_by_kind"]
    assert {k: seen.get(k) for k in ("not-admitted", "not-authorized", "revoked")} == {
        "not-admitted": 1,
        "not-authorized": 2,
        "revoked": 2,
    }, seen


def test_verify_reports_forks_and_gaps_the_push_makes_in_a_chain(team, tmp_path):
    """With alice's stolen key, a push that skips positions of her chain, or writes a
    second event at a position she holds, fails verify with the numbers a replica
    reports (`sync status`: chains)."""
    t, a, b = _team(team)
    stolen = steal(a, "alice", tmp_path)
    before = _tip(t.remote)
    mallory = t.attacker()
    mallory.pull()
    tip = _chain_tip(mallory, "alice")
    n = tip["chain"]["seq"]
    rel = mallory.file_of("messages", "alice")
    held = next(d for d in mallory.events(rel) if (d.get("chain") or {}).get("seq", 0) > 1)
    fork = {"seq": held["chain"]["seq"], "prev": held["chain"]["prev"]}
    mallory.append(rel, _message("alice", stolen, "a second #k", fork))
    mallory.append(rel, _message("alice", stolen, "skipping two", {"seq": n + 3, "prev": "A" * 22}))
    mallory.push("a fork and a gap in alice's chain")

    out = _verify(t.remote, "--from", before, "--to", _tip(t.remote))
    assert out.returncode == 1, out.stdout + out.stderr
    assert _bad_kinds(out) == ["fork", "gap"], out.stdout
    assert f"gap: missing alice #{n + 1}–{n + 2} (seen #{n + 3})" in out.stdout
    assert f"fork: alice #{held['chain']['seq']} is held by two events: " in out.stdout
    assert held["event_id"] in out.stdout
    b.sync()  # the replica reports the same
    chains = b.json("sync", "status")["chains"]
    assert chains["missing"] >= 2 and chains["forks"], chains
    honest = _verify(t.remote, "--from", _tip(t.remote))  # nothing added since: nothing bad
    assert honest.returncode == 0

"""Issue 25 against a hostile remote: admission, team management, rotation and revocation
under a committed team root. The attacker pushes with plain git; honest replicas sync,
one of them a fresh clone made after the attack (docs/design/trust.md)."""

from __future__ import annotations

import time

import pytest

from thrum import events as ev
from thrum.trust import keys, signing

from hostile_helpers import adopt_root, events_file, forge, git, steal, team_with_history

pytestmark = pytest.mark.long_file  # minutes on a loaded machine: started first


def kinds(m) -> dict:
    return m.json("sync", "status")["quarantined_by_kind"]


def names(m) -> set[str]:
    return {a["name"] for a in m.json("agent", "list")["agents"]}


def bodies(m, agent: str) -> list[str]:
    msgs = m.rpc("message.list", {"page_size": 100})["messages"]
    return [x["body"]["content"] for x in msgs]


def message_line(name: str, key_file, content: str) -> bytes:
    private = keys.LocalKeys(key_file.parent).get(name)
    assert private is not None
    d = ev.MessageCreate(
        message_id=signing.new_message_id(private[1].tag),
        agent_id=name,
        session_id=ev.new_id("ses"),
        body=ev.Body(content),
    ).to_dict()
    return forge(d, name, key_file)


def test_admission_and_management_under_a_root_on_every_replica(team, tmp_path):
    t, a, b = team_with_history(team)  # a log written before the root (migration)
    before = dict(kinds(a))
    made = adopt_root(t, a, b)
    assert set(made["admins"]) == {"alice"} and "bob" in made["members"]
    a.sync()
    b.sync()
    # Migration: nothing honest is quarantined under the root, the history stays.
    assert kinds(a) == before and kinds(b) == before
    assert "hello alice" in " ".join(bodies(a, "alice"))
    a.run("group", "create", "reviewers", agent="alice")
    a.run("group", "add", "reviewers", "@bob", agent="alice")
    a.sync()
    b.sync()

    mallory = t.attacker()
    mallory.pull()
    rel = events_file(mallory)
    own = keys.LocalKeys(tmp_path / "mallory-keys")
    _, public = own.create("mallory")
    mkey = tmp_path / "mallory-keys" / "mallory.key"
    reg = ev.AgentRegister(agent_id="mallory", name="mallory", role="intruder", public_key=public.b64).to_dict()
    mallory.append(rel, forge(reg, "mallory", mkey))
    bob_key = steal(b, "bob", tmp_path)  # a member's key: not an admin's
    cleanup = ev.AgentCleanup(agent_id="alice", reason="bye", by="bob").to_dict()
    remove = ev.GroupMemberRemove(group="reviewers", member_value="bob", agent_id="bob").to_dict()
    mallory.append(rel, forge(cleanup, "bob", bob_key))
    mallory.append(rel, forge(remove, "bob", bob_key))
    mallory.push("mallory joins and takes over")

    fresh = t.fresh_clone("d")  # made after the attack: has the root on its main already
    for m in (a, b, fresh):
        m.sync()
        assert "mallory" not in names(m) and "alice" in names(m), m.name
        found = kinds(m)
        assert found.get("not-admitted") == 1 and found.get("not-authorized") == 2, (m.name, found)
        members = m.json("group", "members", "reviewers")
        assert "bob" in {x.get("value") or x.get("member_value") for x in members["members"]}, members
    reasons = " ".join(i["reason"] for i in fresh.json("sync", "status").get("quarantined_reasons", []) or [])
    assert reasons == "" or "not admitted" in reasons or "may not" in reasons

    # An admin admits the waiting registration; every replica then applies it.
    admitted = a.json("team", "admit", "mallory", agent="alice")
    assert admitted["public_key"] == public.b64
    a.sync()
    for m in (b, fresh, a):
        m.sync()
        assert "mallory" in names(m), m.name
        assert kinds(m).get("not-admitted") is None, m.name
    # A non-admin cannot admit.
    refused = b.run("team", "admit", "carol", "--key", public.b64, agent="bob", check=False)
    assert refused.returncode == 1 and "not an admin" in refused.stderr


def test_rotation_and_revocation_hold_on_every_path(team, tmp_path):
    t = team(3)
    a, b, c = t.machines
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    for m in (a, b, c, a):
        m.sync()
    adopt_root(t, a, b, c)
    for m in (a, b, c):
        m.sync()
    stolen = steal(b, "bob", tmp_path)  # the laptop is stolen
    b.run("send", "before the rotation", "--to", "@alice", agent="bob")
    rotated = b.json("agent", "rotate-key", agent="bob")
    assert rotated["old_key"] != rotated["public_key"]
    b.run("send", "with the new key", "--to", "@alice", agent="bob")
    b.sync()

    # The thief writes with the old key after the rotation: refused everywhere.
    mallory = t.attacker()
    mallory.pull()
    mallory.append(mallory.file_of("messages", "bob"), message_line("bob", stolen, "thief after rotation"))
    mallory.push("the thief writes as bob")
    for m in (a, c):
        m.sync()
        seen = bodies(m, "alice")
        assert "before the rotation" in seen and "with the new key" in seen, (m.name, seen)
        assert "thief after rotation" not in seen, m.name
        assert kinds(m).get("revoked") == 1, (m.name, kinds(m))

    # The laptop again: an admin revokes bob's *new* key from a minute ago. A line bob's
    # key signed before the revocation reached C, then the remote dropped it, so A never
    # saw it: it comes back to A late, through C, and is refused there as everywhere.
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    b.run("send", "signed, then revoked", "--to", "@alice", agent="bob")
    b.sync()
    c.sync()
    assert "signed, then revoked" in bodies(c, "alice")  # applied before the revocation
    mallory.pull()
    rel = mallory.file_of("messages", "bob")
    mallory.write(rel, b"".join(x + b"\n" for x in mallory.lines(rel) if b"signed, then revoked" not in x))
    mallory.push("withhold a line")
    a.sync()
    assert "signed, then revoked" not in bodies(a, "alice")
    a.run("team", "revoke", "bob", "--since", since, agent="alice")
    a.sync()
    c.sync()  # learns the revocation: what it applied is judged again; it pushes the line back
    a.sync()  # the line arrives late
    fresh = t.fresh_clone("d")
    fresh.sync()
    for m in (a, c, fresh):
        seen = bodies(m, "alice")
        assert "before the rotation" in seen, (m.name, seen)  # the old key, before its rotation
        assert "with the new key" not in seen and "signed, then revoked" not in seen, (m.name, seen)
        assert "thief after rotation" not in seen, (m.name, seen)
        assert kinds(m).get("revoked", 0) >= 3, (m.name, kinds(m))
    shown = a.json("team", "show")
    assert {r["name"] for r in shown["retired"]} == {"bob"} and len(shown["retired"]) == 2
    assert "Retired key:" in a.run("sync", "status").stdout


def test_invites_and_a_root_edited_on_a_side_branch(team, tmp_path):
    t = team(2)
    a, b = t.machines
    a.agent("alice", "implementer")
    a.sync()
    b.sync()
    adopt_root(t, a, b)
    a.sync()

    # The attacker pushes a side branch whose root makes mallory an admin, and an
    # admission signed by mallory: a side branch does not count until it is merged.
    own = keys.LocalKeys(tmp_path / "mallory-keys")
    _, public = own.create("mallory")
    mkey = tmp_path / "mallory-keys" / "mallory.key"
    evil = (a.path / "thrum-team.toml").read_text().replace("[admins]\n", f'[admins]\nmallory = "{public.b64}"\n')
    git(a, "checkout", "-q", "-b", "evil")
    (a.path / "thrum-team.toml").write_text(evil)
    git(a, "commit", "-q", "-am", "make mallory an admin")
    git(a, "push", "-q", "origin", "evil")
    git(a, "checkout", "-q", "main")
    git(b, "fetch", "-q", "origin")
    git(b, "checkout", "-q", "-b", "evil", "origin/evil")  # even checked out
    mallory = t.attacker()
    mallory.pull()
    rel = events_file(mallory)
    reg = ev.AgentRegister(agent_id="mallory", name="mallory", role="intruder", public_key=public.b64).to_dict()
    mallory.append(rel, forge(reg, "mallory", mkey))
    admit = ev.AgentAdmit(agent_id="eve", by="mallory", public_key=public.b64).to_dict()
    mallory.append(rel, forge(admit, "mallory", mkey))
    mallory.push("self-made admin")
    b.sync()
    assert b.json("team", "show")["root"]["admins"].keys() == {"alice"}
    assert "mallory" not in names(b)
    assert kinds(b).get("not-admitted") == 1 and kinds(b).get("not-authorized") == 1
    git(b, "checkout", "-q", "main")

    # An invite: the admin makes a code; the new agent redeems it on its own machine.
    code = a.json("team", "invite", "carol", agent="alice")["code"]
    a.sync()
    b.sync()
    b.run("quickstart", "--name", "carol", "--role", "tester", "--invite", code)
    b.run("send", "carol is in", "--to", "@alice", agent="carol")
    b.sync()
    a.sync()
    assert "carol" in names(a) and "carol is in" in bodies(a, "alice")
    assert kinds(a).get("not-admitted") == 1  # mallory only
    wrong = b.run("quickstart", "--name", "dave", "--role", "tester", "--invite", code, check=False)
    assert wrong.returncode == 1 and "for 'carol'" in wrong.stderr


def test_lines_of_a_rotated_key_that_arrive_before_the_rotation_are_applied_once_it_comes(team):
    """The remote withholds bob's rotation but passes on what he then wrote with the new key:
    A refuses those lines (no key of bob's it knows verifies them). When the rotation comes
    back (B pushes it again), A judges them again and applies them, as a rebuild would: the
    verdict does not depend on which line came first."""
    t = team(2)
    a, b = t.machines
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    for m in (a, b, a):
        m.sync()
    adopt_root(t, a, b)
    a.sync()
    b.sync()
    b.json("agent", "rotate-key", agent="bob")
    b.run("send", "written with the new key", "--to", "@alice", agent="bob")
    b.sync()
    mallory = t.attacker()
    mallory.pull()
    rel = events_file(mallory)
    mallory.write(rel, b"".join(x + b"\n" for x in mallory.lines(rel) if b'"agent.rotate"' not in x))
    mallory.push("withhold bob's rotation")
    a.sync()
    assert "written with the new key" not in bodies(a, "alice")
    b.sync()  # finds its rotation gone and pushes it back
    a.sync()
    assert "written with the new key" in bodies(a, "alice")
    assert not {"bad-signature", "id-not-owned"} & set(kinds(a)), kinds(a)

"""Authorship on a hostile remote: nobody with push access puts words in an agent's
mouth, takes over its messages or its registration (findings 3, 4, 5 and 7)."""

from __future__ import annotations

import json

from thrum import events as ev
from thrum.trust import keys

from hostile_helpers import events_file, forge


def _team(team):
    t = team(2)
    a, b = t.machines
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    a.sync()
    b.sync()
    a.sync()
    a.run("send", "the original words", "--to", "@bob", agent="alice")
    b.run("send", "bob's own words", "--to", "@alice", agent="bob")
    a.sync()
    b.sync()
    a.sync()
    return t, a, b


def _messages(m, agent):
    """message id -> (author, content) of every message ``agent`` can list on machine ``m``."""
    listed = m.rpc("message.list", {"caller": agent, "page_size": 100})["messages"]
    return {x["message_id"]: (x["agent_id"], x["body"]["content"]) for x in listed}


def _alice_create(mallory):
    for rel in mallory.files():
        if rel.startswith("messages/alice"):
            for line in mallory.lines(rel):
                d = json.loads(line)
                if d.get("type") == "message.create":
                    return rel, line, d
    raise AssertionError("alice's message is not on the remote")


def test_a_message_cannot_be_taken_over_even_with_a_stolen_key(team):
    t, a, b = _team(team)
    mallory = t.attacker()
    _, _, original = _alice_create(mallory)
    takeover = dict(
        original,
        agent_id="bob",
        event_id="00000000000000000000000000",
        body={"format": "markdown", "content": "bob's words now", "structured": ""},
    )
    bob_key = b.paths.identities / "bob.key"
    mallory.append(mallory.file_of("messages", "bob"), forge(takeover, "bob", bob_key))
    mallory.push()
    for m in (a, b):
        m.sync()
        assert _messages(m, "alice")[original["message_id"]] == ("alice", "the original words")
        assert m.json("sync", "status")["quarantined_by_kind"].get("id-not-owned", 0) >= 1
    a.run("message", "edit", original["message_id"], "edited by alice", agent="alice")
    assert _messages(a, "alice")[original["message_id"]] == ("alice", "edited by alice")


def test_rewritten_lines_never_replace_the_original_and_fresh_lines_from_alice_are_refused(team):
    t, a, b = _team(team)
    mallory = t.attacker()
    rel, line, original = _alice_create(mallory)
    data = (mallory.dir / rel).read_bytes().replace(b"the original words", b"tampered words")
    mallory.write(rel, data)
    fake = dict(
        original,
        event_id=ev.new_ulid(),
        message_id="msg_" + ev.new_ulid(),
        body={"format": "markdown", "content": "alice never said this", "structured": ""},
    )
    mallory.append(rel, forge(fake, "alice", None))
    mallory.push()

    for m in (b, a):
        m.sync()
    # a rebuild from each replica's own log shows the original words only
    for m in (a, b):
        m.run("daemon", "stop")
        (m.paths.var / "messages.db").unlink()
        m.run("daemon", "start")
        contents = {c for _, c in _messages(m, "bob").values()}
        assert "the original words" in contents
        assert not contents & {"tampered words", "alice never said this"}
    # the honest replicas put the original back on the remote, and all agree byte for byte
    for m in (a, b, a):
        m.sync()
    mallory.pull()
    assert b"the original words" in (mallory.dir / rel).read_bytes()
    assert b"tampered words" not in (mallory.dir / rel).read_bytes()
    assert a.shards() == b.shards()
    assert a.shards()[rel] == (mallory.dir / rel).read_bytes()


def test_a_registration_cannot_be_hijacked(team, tmp_path):
    t, a, b = _team(team)
    mallory = t.attacker()
    own = keys.LocalKeys(tmp_path / "mallory-keys")
    own.create("alice")
    reg = next(
        json.loads(x)
        for x in mallory.lines(events_file(mallory))
        if json.loads(x).get("type") == "agent.register" and json.loads(x).get("agent_id") == "alice"
    )
    hijack = dict(reg, role="hijacked", event_id=ev.new_ulid(), public_key=keys.public_b64(own.get("alice")[0]))
    rel = events_file(mallory)
    mallory.append(rel, forge(hijack, "alice", tmp_path / "mallory-keys" / "alice.key"))
    mallory.append(rel, forge(dict(reg, role="hijacked", event_id=ev.new_ulid()), "alice", None))
    mallory.push()
    for m in (a, b):
        synced = m.run("sync", check=False)  # a second key for a name is loud (issue 30, item 4)
        assert synced.returncode == 1 and "name conflict: @alice " in synced.stderr, synced.stderr
        roles = {x["name"]: x["role"] for x in m.json("agent", "list")["agents"]}
        assert roles["alice"] == "implementer"
        by_kind = m.json("sync", "status")["quarantined_by_kind"]
        assert by_kind.get("key-conflict", 0) >= 1
        assert by_kind.get("unsigned", 0) >= 1


def test_impossible_timestamps_are_quarantined(team):
    t, a, b = _team(team)
    mallory = t.attacker()
    _, _, original = _alice_create(mallory)
    rel = mallory.file_of("messages", "bob")
    bob_key = b.paths.identities / "bob.key"
    for ts in ("2026-13-45T25:61:61Z", "９９９9-01-01T00:00:00Z", "9999-01-01T00:00:00Z"):
        pinned = dict(original, agent_id="bob", timestamp=ts, event_id=ev.new_ulid(), message_id="msg_" + ev.new_ulid())
        mallory.append(rel, forge(pinned, "bob", bob_key))
    mallory.push()
    a.sync()
    inbox = a.rpc("message.list", {"caller": "alice", "page_size": 10})["messages"]
    assert sorted(m["body"]["content"] for m in inbox) == ["bob's own words", "the original words"]
    assert a.json("sync", "status")["quarantined"] >= 3


def test_lines_signed_with_another_agents_key_are_quarantined(team):
    t, a, b = _team(team)
    mallory = t.attacker()
    rel, _, original = _alice_create(mallory)
    bob_key = b.paths.identities / "bob.key"
    for signer, content in (("bob", "signed by bob, written as alice"), ("alice", "bob's key, alice's name")):
        fake = dict(
            original,
            event_id=ev.new_ulid(),
            message_id="msg_" + ev.new_ulid(),
            body={"format": "markdown", "content": content, "structured": ""},
        )
        mallory.append(rel, forge(fake, signer, bob_key))
    mallory.push()
    for m in (a, b):
        m.sync()
        contents = {c for _, c in _messages(m, "bob").values()}
        assert contents == {"the original words", "bob's own words"}
        by_kind = m.json("sync", "status")["quarantined_by_kind"]
        assert by_kind.get("forged", 0) >= 1  # signed by bob, written as alice
        # signed "as alice" with bob's key: refused before its signature is even checked,
        # because a fresh message id is bound to its creator's key and this one is not alice's
        assert by_kind.get("bad-signature", 0) + by_kind.get("id-not-owned", 0) >= 1

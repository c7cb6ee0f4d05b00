"""Per-writer chains on a hostile remote (issue 25, item 4): a withheld range, a fork and a
rollback are each reported, with the right numbers, by three honest replicas — one of them
a fresh clone made after the attack. The attacker pushes with plain git."""

from __future__ import annotations

import json

import pytest

from thrum import events as ev
from thrum.trust import signing
from thrum.trust.chains import sig_hash

from hostile_helpers import forge, fork_latest

pytestmark = pytest.mark.long_file  # minutes on a loaded machine: started first


def _team(team, sends: int = 6):
    """alice on A and bob on B, synced, with ``sends`` of alice's notes to bob (a copy of
    the team, built once per run)."""

    def build(t) -> None:
        a, b = t.machines
        a.agent("alice", "implementer")
        b.agent("bob", "reviewer")
        a.sync()
        b.sync()
        for i in range(sends):
            a.run("send", f"note {i}", "--to", "@bob", agent="alice")
        a.sync()
        b.sync()

    t = team.prepared(f"chains-{sends}", build)
    a, b = t.machines
    return t, a, b


def _chained(mallory, rel):
    return [(line, d) for line, d in ((ln, json.loads(ln)) for ln in mallory.lines(rel)) if "chain" in d]


def _alice_chain(mallory) -> list[dict]:
    """alice's chained events in the attacker's checkout, from every file, by position
    (her messages, and her lifecycle's: sessions started and ended)."""
    found = [
        d
        for rel in mallory.files()
        for d in mallory.events(rel)
        if "chain" in d and (d.get("sig") or {}).get("by") == "alice"
    ]
    return sorted(found, key=lambda d: d["chain"]["seq"])


def _alice_positions(mallory) -> set[int]:
    return {d["chain"]["seq"] for d in _alice_chain(mallory)}


def _doctor_chains(m) -> dict:
    """`thrum doctor`'s chains check (doctor exits non-zero when a check warns or fails)."""
    out = json.loads(m.run("doctor", "--json", check=False).stdout)
    return next(x for x in out["checks"] if x["check"] == "chains")


def _chains(m) -> dict:
    return m.json("sync", "status")["chains"]


def test_a_withheld_range_is_reported_with_its_numbers_by_a_fresh_clone(team):
    t, a, b = _team(team)
    mallory = t.attacker()
    rel = mallory.file_of("messages", "alice")
    lines = mallory.lines(rel)
    chained = _chained(mallory, rel)
    assert len(chained) >= 4
    (_, d1), (_, d2), (_, last) = chained[1], chained[2], chained[-1]
    withheld = {d1["event_id"], d2["event_id"]}
    mallory.write(rel, b"".join(ln + b"\n" for ln in lines if json.loads(ln).get("event_id") not in withheld))
    mallory.push("withhold two of alice's lines")
    c = t.fresh_clone("carol")
    c.sync()
    lo, hi = d1["chain"]["seq"], d2["chain"]["seq"]
    assert hi == lo + 1
    gaps = _chains(c)["gaps"]
    high = max(_alice_positions(mallory))  # her last line: a message, or her session's end
    assert high >= last["chain"]["seq"]
    mine = [g for g in gaps if g["signer"] == "alice"]
    assert mine == [
        {"signer": "alice", "from": lo, "to": hi, "seen": high, "text": f"missing alice #{lo}–{hi} (seen #{high})"}
    ]
    assert f"Chains:        missing alice #{lo}–{hi} (seen #{high})" in c.run("sync", "status").stdout
    check = _doctor_chains(c)
    assert check["status"] == "warn" and f"missing alice #{lo}–{hi} (seen #{high})" in check["detail"]
    c.run("daemon", "stop")  # with the daemon stopped, `sync status` shows what it last reported
    assert [g for g in _chains(c)["gaps"] if g["signer"] == "alice"] == mine
    assert (
        f"Chains:        missing alice #{lo}–{hi} (seen #{high}) (as of the daemon's last sync, "
        in c.run("sync", "status").stdout
    )
    c.run("daemon", "start")
    # The honest replicas hold the range and push it back; then the clone has no gap.
    for m in (a, b):
        assert [g for g in _chains(m)["gaps"] if g["signer"] == "alice"] == []
    a.sync()
    c.sync()
    assert _chains(c)["gaps"] == [] and _chains(c)["missing"] == 0


def test_a_fork_made_with_a_stolen_key_is_reported_with_both_events_everywhere(team):
    t, a, b = _team(team, sends=3)
    mallory = t.attacker()
    # alice's latest event: the attacker writes another one at its place
    target, other = fork_latest(mallory, "alice", a.paths.identities / "alice.key", "receipts/alice/000001.jsonl")
    seq = target["chain"]["seq"]
    mallory.push("alice, twice")
    c = t.fresh_clone("carol")
    for m in (a, b, c):
        m.sync()
        chains = _chains(m)
        forks = [f for f in chains["faults"] if f["kind"] == "fork"]
        assert chains["forks"] == 1 and len(forks) == 1, (
            chains,
            m.json("sync", "status")["quarantined_by_kind"],
            mallory.files(),
        )
        fork = forks[0]
        assert (fork["signer"], fork["seq"]) == ("alice", seq)
        assert sorted([fork["event_id"], *fork["other"]]) == sorted([target["event_id"], other["event_id"]])
        assert f"alice #{seq} is claimed by 2 different events" in fork["text"]
        check = _doctor_chains(m)
        assert check["status"] == "fail"
    assert a.rpc("sync.chains")["forks"] == 1  # what the web UI shows
    c.run("daemon", "stop")
    offline = _chains(c)  # the daemon stopped: `sync status` shows the fork it last reported
    assert offline["forks"] == 1 and [f["seq"] for f in offline["faults"] if f["kind"] == "fork"] == [seq]
    assert offline["at"]


def test_a_line_linking_to_another_history_is_a_broken_link(team):
    t, a, b = _team(team, sends=2)
    mallory = t.attacker()
    rel = mallory.file_of("messages", "alice")
    _, note = _chained(mallory, rel)[-1]
    last = _alice_chain(mallory)[-1]  # her last line: a message, or her session's end
    seq = last["chain"]["seq"]
    stray_sig = signing.signature_of(last)[1][::-1]  # a predecessor nobody here holds
    nxt = {
        "type": "message.read",
        "timestamp": ev.now_rfc3339(),
        "event_id": ev.new_ulid(),
        "v": 1,
        "agent_id": "alice",
        "message_ids": [note["message_id"]],
        "chain": {"seq": seq + 1, "prev": sig_hash(stray_sig)},
    }
    mallory.write("receipts/alice/000001.jsonl", forge(nxt, "alice", a.paths.identities / "alice.key"))
    mallory.push()
    b.sync()
    faults = _chains(b)["faults"]
    assert [(f["kind"], f["seq"], f["event_id"], f["other"]) for f in faults] == [
        ("broken-link", seq + 1, nxt["event_id"], [last["event_id"]])
    ]


def test_a_rollback_is_reported_with_the_lines_it_dropped_and_they_are_pushed_back(team):
    t, a, b = _team(team, sends=2)
    mallory = t.attacker()
    before = mallory._git("rev-parse", "HEAD").strip()
    for i in range(3):
        a.run("send", f"later {i}", "--to", "@bob", agent="alice")
    a.sync()
    b.sync()
    mallory.pull()
    rel = mallory.file_of("messages", "alice")
    later = [d for _, d in _chained(mallory, rel)][-3:]
    pushed = _alice_positions(mallory)
    mallory._git("reset", "--quiet", "--hard", before)  # a-sync as it was before alice's last three
    mallory._git("push", "--quiet", "--force", "origin", "HEAD:a-sync")
    # what the rollback drops: alice's last three, and any line of hers a pushed with them
    # (her session's start and end, when her daemon started since the team was made)
    dropped = sorted(pushed - _alice_positions(mallory))
    lo, hi = dropped[0], dropped[-1]
    assert dropped == list(range(lo, hi + 1)) and {d["chain"]["seq"] for d in later} <= set(dropped)
    c = t.fresh_clone("carol")
    c.sync()
    assert [
        m["body"]["content"]
        for m in c.rpc("message.list", {"caller": "bob", "page_size": 50})["messages"]
        if m["body"]["content"].startswith("later")
    ] == []
    report = a.sync()
    lost = report["rolled_back"]
    assert lost is not None and lost["writers"][0]["signer"] == "alice"
    assert lost["writers"][0]["ranges"][0] == [lo, hi], lost
    assert f"alice #{lo}–{hi}" in lost["text"] and "pushed back" in lost["text"]
    rollbacks = _chains(a)["rollbacks"]
    assert len(rollbacks) == 1 and rollbacks[0]["writers"][0]["ranges"][0] == [lo, hi]
    assert "rollback" in _doctor_chains(a)["detail"]
    c.sync()
    contents = {m["body"]["content"] for m in c.rpc("message.list", {"caller": "bob", "page_size": 50})["messages"]}
    assert {"later 0", "later 1", "later 2"} <= contents
    assert _chains(c)["gaps"] == []
    a.sync()
    assert len(_chains(a)["rollbacks"]) == 1  # reported once, not at every sync

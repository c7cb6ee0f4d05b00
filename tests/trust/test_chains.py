"""Per-writer chains, the pure part: links, positions held, gaps (issue 25, item 4)."""

from __future__ import annotations


from hypothesis import given
from hypothesis import strategies as st

from thrum.trust import keys, signing
from thrum.trust.chains import Link, Spans, gap_text, link_of, range_faults, sig_hash, unsure_signers


def test_a_link_names_its_event_by_the_hash_of_its_signature():
    private = keys.generate()
    d = {"type": "message.read", "event_id": "01J" + "0" * 23, "agent_id": "alice", "chain": {"seq": 1}}
    signed = signing.sign(d, "alice", private)
    link = link_of(signed)
    assert link is not None and (link.signer, link.seq, link.prev, link.log) == ("alice", 1, "", "")
    assert link.hash == sig_hash(signing.signature_of(signed)[1]) and len(link.hash) == 22
    assert link_of({**d, "chain": None}) is None  # written before chains
    changed = signing.sign({**d, "agent_id": "alice", "message_ids": ["msg_x"]}, "alice", private)
    assert link_of(changed).hash != link.hash  # what the event says changes its name


def test_gaps_name_the_missing_positions_below_the_highest_seen():
    spans = Spans()
    spans.add([*range(1, 408), 410])
    assert spans.text() == "1-407,410" and spans.high() == 410
    assert spans.gaps() == [(408, 409)] and spans.missing() == 2
    assert gap_text("alice", 408, 409, 410) == "missing alice #408–409 (seen #410)"
    assert gap_text("alice", 3, 3, 9) == "missing alice #3 (seen #9)"
    spans.add([409, 408])
    assert spans.gaps() == [] and spans.text() == "1-410"
    late = Spans.parse("5-6")
    assert late.gaps() == [(1, 4)]


@given(st.lists(st.integers(1, 60), max_size=80), st.randoms())
def test_positions_held_do_not_depend_on_the_order_they_arrive_in(seqs, rnd):
    one = Spans()
    one.add(seqs)
    other = Spans()
    shuffled = list(seqs)
    rnd.shuffle(shuffled)
    for i in range(0, len(shuffled), 3):
        other.add(shuffled[i : i + 3])
        other = Spans.parse(other.text())  # stored and read back between batches
    assert one.ranges == other.ranges
    held = set(seqs)
    assert {s for lo, hi in one.gaps() for s in range(lo, hi + 1)} == set(range(1, max(held, default=0) + 1)) - held


def _signed_read(private, seq, log=None, prev="A" * 22):
    from thrum import events as ev

    chain = {"seq": seq} if seq == 1 else {"seq": seq, "prev": prev}
    if log:
        chain["log"] = log
    d = {
        "type": "message.read",
        "timestamp": ev.now_rfc3339(),
        "event_id": ev.new_ulid(),
        "v": 1,
        "agent_id": "alice",
        "message_ids": ["msg_x"],
        "chain": chain,
    }
    line = ev.encode_line(signing.sign(d, "alice", private))
    return line


def test_lines_signed_for_another_log_are_quarantined_as_foreign_log_and_old_lines_stay_valid():
    from thrum import events as ev
    from thrum.trust.binding import LogBinding
    from thrum.trust.keys import PublicKey, public_raw
    from thrum.trust.ring import KeyRing
    from thrum.trust.verify import Candidate, Verifier

    private = keys.generate()
    ring = KeyRing(None)
    ring.learn("alice", PublicKey(public_raw(private)))
    ours, theirs = "log_01JAAAAAAAAAAAAAAAAAAAAAAA", "log_01JBBBBBBBBBBBBBBBBBBBBBBB"
    lines = {
        "ours": _signed_read(private, 3, ours),
        "theirs": _signed_read(private, 4, theirs),
        "before-the-root": _signed_read(private, 1),
        "before-chains": ev.encode_line(
            signing.sign(
                {k: v for k, v in ev.decode_line(_signed_read(private, 2)).items() if k not in ("chain", "sig")},
                "alice",
                private,
            )
        ),
    }
    batch = [Candidate("receipts/alice/000001.jsonl", line, ev.decode_line(line)) for line in lines.values()]
    verdict = Verifier(ring, binding=LogBinding(ours)).check(batch)
    assert [(r.kind, r.event_id) for r in verdict.rejected] == [
        ("foreign-log", ev.decode_line(lines["theirs"])["event_id"])
    ]
    assert theirs in verdict.rejected[0].reason and ours in verdict.rejected[0].reason
    assert len(verdict.accepted) == 3
    assert Verifier(ring).check(batch).rejected == []  # without a root, no log is judged (binding rule 4)


def test_the_log_binding_reads_the_root_again_when_it_is_old():
    from thrum.trust.binding import LogBinding

    now = [0.0]
    roots = iter(["log_A", "log_B"])
    binding = LogBinding(read=lambda: next(roots, "log_B"), max_age_s=5, clock=lambda: now[0])
    assert binding.get() == "log_A"
    now[0] = 4
    assert binding.get() == "log_A"  # fresh enough: not read again
    now[0] = 6
    assert binding.get() == "log_B"  # a root committed since takes effect
    assert LogBinding().get() is None and LogBinding().refresh() is False


def _ln(seq: int, name: str, prev: str = "", signer: str = "alice") -> Link:
    return Link(signer, seq, prev, name, f"ev_{name}", "")


def test_range_faults_name_forks_broken_links_and_gaps_a_push_makes():
    """`thrum verify`'s chain check (issue 25, item 7): what a range of added events does to
    its writers' chains, given the newest events held before."""
    held = [_ln(4, "h4", "h3"), _ln(5, "h5", "h4")]
    honest = [_ln(6, "a6", "h5"), _ln(7, "a7", "a6")]
    assert range_faults(honest, held) == [] and unsure_signers(honest, held) == set()
    gap = [_ln(6, "a6", "h5"), _ln(9, "a9", "a8")]
    assert [(f.kind, f.event_id, f.reason) for f in range_faults(gap, held)] == [
        ("gap", "ev_a9", "missing alice #7–8 (seen #9)")
    ]
    forked = [_ln(5, "x5", "h4")]
    assert [(f.kind, f.event_id) for f in range_faults(forked, held)] == [("fork", "ev_x5")]
    assert "ev_x5 and ev_h5" in range_faults(forked, held)[0].reason
    twice = [_ln(6, "a6", "h5"), _ln(6, "b6", "h5")]
    assert sorted(f.event_id for f in range_faults(twice, held) if f.kind == "fork") == ["ev_a6", "ev_b6"]
    broken = [_ln(6, "a6", "elsewhere")]
    assert [(f.kind, f.event_id) for f in range_faults(broken, held)] == [("broken-link", "ev_a6")]
    # a position at or below the newest held that the held events say nothing of: read more
    assert unsure_signers([_ln(2, "a2", "h1")], held) == {"alice"}
    assert unsure_signers([_ln(1, "b1", signer="bob")], held) == set()  # bob's first: nothing held

"""Admission, rotation, revocation and management, judged by the pure verifier: the rules per
event type (docs/design/trust.md), and the same verdicts whatever order lines arrive in."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from thrum import events as ev
from thrum.trust import keys, signing
from thrum.trust.ring import KeyRing
from thrum.trust.roster import Roster
from thrum.trust.teamroot import TeamRoot, new_log_id
from thrum.trust.verdicts import digest
from thrum.trust.verify import RETRY_KINDS, Verifier

from test_trust import Agent, cand


def at(ms: int, rand: int = 7) -> str:
    from ulid import ULID

    return str(ULID.from_int((ms << 80) | rand))


T0 = 1_790_000_000_000  # 2026-09


def stamp(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def dated(event: ev.Event | dict, ms: int) -> dict:
    d = event if isinstance(event, dict) else event.to_dict()
    return {**d, "event_id": at(ms), "timestamp": stamp(ms)}


class Scene:
    """A team under a root (admin alice, member bob) and the lines a hostile remote may carry."""

    def __init__(self):
        self.alice, self.bob, self.carol, self.mallory = (Agent(n) for n in ("alice", "bob", "carol", "mallory"))
        self.root = TeamRoot(
            log_id=new_log_id(), policy="admins", admins={"alice": self.alice.public}, members={"bob": self.bob.public}
        )
        a, b, c, m = self.alice, self.bob, self.carol, self.mallory
        new_bob = keys.generate()
        new_bob_pub = keys.PublicKey(keys.public_raw(new_bob))
        self.lines: dict[str, bytes] = {
            "alice-reg": a.register(),
            "bob-reg": b.register(),
            "admit-carol": a.line(dated(ev.AgentAdmit(agent_id="carol", by="alice", public_key=c.public.b64), T0)),
            "carol-reg": c.register(),
            "carol-msg": c.send("carol speaks"),
            "mallory-reg": m.register(),
            "mallory-msg": m.send("mallory speaks"),
            "bob-before": b.line(dated(_msg(b, "before"), T0 + 1000)),
            "bob-rotate": b.line(
                dated(ev.AgentRotate(agent_id="bob", public_key=new_bob_pub.b64, old_key=b.public.b64), T0 + 2000)
            ),
            "bob-new": ev.encode_line(
                signing.sign(dated(_msg_key(new_bob_pub, "bob", "new key"), T0 + 3000), "bob", new_bob)
            ),
            "thief-old": b.line(dated(_msg(b, "thief"), T0 + 4000)),
            "revoke-new": a.line(
                dated(
                    ev.AgentRevoke(agent_id="bob", by="alice", public_key=new_bob_pub.b64, from_event=at(T0 + 5000, 0)),
                    T0 + 6000,
                )
            ),
            "bob-after-revoke": ev.encode_line(
                signing.sign(dated(_msg_key(new_bob_pub, "bob", "after revoke"), T0 + 5500), "bob", new_bob)
            ),
            "group-by-carol": c.line(dated(ev.GroupCreate(name="crew", created_by="carol"), T0 + 100)),
            "add-by-carol": c.line(
                dated(ev.GroupMemberAdd(group="crew", member_value="bob", agent_id="carol"), T0 + 200)
            ),
            "add-by-bob": b.line(dated(ev.GroupMemberAdd(group="crew", member_value="bob", agent_id="bob"), T0 + 300)),
            "remove-by-alice": a.line(
                dated(ev.GroupMemberRemove(group="crew", member_value="bob", agent_id="alice"), T0 + 400)
            ),
            "cleanup-by-bob": b.line(dated(ev.AgentCleanup(agent_id="alice", by="bob"), T0 + 500)),
            "cleanup-self": c.line(dated(ev.AgentCleanup(agent_id="carol"), T0 + 600)),
        }

    def verifier(self) -> Verifier:
        ring = KeyRing()
        return Verifier(ring, roster=Roster(ring, self.root), skew_s=1e9)


def _msg(agent: Agent, content: str) -> ev.MessageCreate:
    return _msg_key(agent.public, agent.name, content)


def _msg_key(key: keys.PublicKey, name: str, content: str) -> ev.MessageCreate:
    return ev.MessageCreate(
        message_id=signing.new_message_id(key.tag), agent_id=name, session_id=ev.new_id("ses"), body=ev.Body(content)
    )


def replica(verifier: Verifier, batches: list[list[bytes]], *, partial: bool = False) -> set[bytes]:
    """What a replica ends with after receiving ``batches`` in turn: lines that wait are judged
    again when a fact lets them through (`store.verified`), and the log is judged again
    when a key is retired (the daemon's rebuild), as the daemon does. ``partial``: only
    when the retirement covers a line accepted before it (signed with that key from its
    point on: `VerifiedFold._check_retired`), as the daemon does now."""
    accepted: set[bytes] = set()
    waiting: dict[str, list[bytes]] = {}
    seen: list[bytes] = []
    rejudge = False
    for batch in batches:
        seen += batch
        before = set(accepted)
        retired = _judge(verifier, batch, accepted, waiting)
        if partial:
            rejudge |= any(_covers(r, line) for r in retired for line in before)
        else:
            rejudge |= bool(retired)
    if rejudge:  # the daemon rebuilds: every line judged again with what is known now
        return _once(verifier, seen)
    return accepted


def _covers(r, line: bytes) -> bool:
    """Whether retirement ``r`` takes back ``line`` (its agent's, from the point on, signed with that key)."""
    raw = json.loads(AS_WRITTEN.get(line, line))  # accepted lines are kept normalised; a signature covers the line
    found = signing.signature_of(raw)
    return (
        found is not None
        and found[0] == r.name
        and raw.get("event_id", "") >= r.point
        and signing.verify(raw, keys.decode_public(r.key))
    )


def _once(verifier: Verifier, lines: list[bytes]) -> set[bytes]:
    accepted: set[bytes] = set()
    _judge(verifier, lines, accepted, {})
    return accepted


def _judge(verifier: Verifier, lines: list[bytes], accepted: set[bytes], waiting: dict[str, list[bytes]]) -> list:
    """Judge ``lines`` and what they let through; the keys retired meanwhile."""
    retired: list = []
    todo = lines
    while todo:
        verdict = verifier.check([cand(x) for x in todo])
        retired += verdict.retired
        _absorb(verdict, accepted, waiting)
        todo = [x for k in verdict.learned + verdict.unblocked for x in waiting.pop(k, [])]
    return retired


def _absorb(verdict, accepted: set[bytes], waiting: dict[str, list[bytes]]) -> None:
    by_event = {}
    for c in verdict.pending:
        found = signing.signature_of(c.event)
        waiting.setdefault(found[0] if found else "", []).append(c.line)
    for c, _kind, key, _why in verdict.waiting:
        waiting.setdefault(key, []).append(c.line)
    for r in verdict.rejected:  # may verify with a key the signer gets later (a rotation, an admission)
        if r.kind in RETRY_KINDS:
            waiting.setdefault(r.signer, []).append(r.line)
    for _shard, d in verdict.accepted:
        by_event[d.get("event_id")] = d
    accepted.update(ev.encode_line({k: v for k, v in d.items()}) for d in by_event.values())


def names_of(scene: Scene, accepted: set[bytes]) -> set[str]:
    canon = {ev.encode_line(ev.decode_line(line)): name for name, line in scene.lines.items()}
    return {canon[x] for x in accepted if x in canon}


SCENE = Scene()
AS_WRITTEN = {ev.encode_line(ev.decode_line(line)): line for line in SCENE.lines.values()}


def test_the_rules_per_event_type():
    got = names_of(SCENE, _once(SCENE.verifier(), list(SCENE.lines.values())))
    assert got == {
        "alice-reg",
        "bob-reg",
        "admit-carol",
        "carol-reg",
        "carol-msg",  # admitted by an admin
        "bob-before",
        "bob-rotate",
        "bob-new",  # before the rotation, the rotation, the new key
        "revoke-new",  # an admin's revocation
        "group-by-carol",
        "add-by-carol",  # the group's creator manages it
        "remove-by-alice",  # an admin manages any group
        "cleanup-self",  # an agent removes itself
    }
    # refused: mallory (not admitted), the thief's old-key line after the rotation, the new
    # key's line after its revocation point, bob changing carol's group, bob removing alice


def test_the_kinds_reported():
    verdict = SCENE.verifier().check([cand(x) for x in SCENE.lines.values()])
    kinds = sorted(r.kind for r in verdict.rejected) + sorted(k for _, k, _, _ in verdict.waiting)
    assert kinds == ["not-authorized", "revoked", "revoked", "not-admitted", "not-authorized"]


@settings(max_examples=40, deadline=None)
@given(st.permutations(list(SCENE.lines)), st.lists(st.integers(1, 6), min_size=1, max_size=8))
def test_replicas_that_receive_the_same_lines_in_any_order_reach_the_same_verdicts(order, cuts):
    expected = names_of(SCENE, _once(SCENE.verifier(), list(SCENE.lines.values())))
    batches, i = [], 0
    for n in cuts:
        batches.append([SCENE.lines[k] for k in order[i : i + n]])
        i += n
    batches.append([SCENE.lines[k] for k in order[i:]])
    assert names_of(SCENE, replica(SCENE.verifier(), [b for b in batches if b])) == expected


@settings(max_examples=40, deadline=None)
@given(st.permutations(list(SCENE.lines)), st.lists(st.integers(1, 6), min_size=1, max_size=8))
def test_rebuilding_only_when_a_retirement_covers_an_applied_line_reaches_the_same_verdicts(order, cuts):
    """The partial path (issue 25): a retirement rebuilds only when it takes back a line
    applied before it; every arrival order still ends with the verdicts of one judgement."""
    expected = names_of(SCENE, _once(SCENE.verifier(), list(SCENE.lines.values())))
    batches, i = [], 0
    for n in cuts:
        batches.append([SCENE.lines[k] for k in order[i : i + n]])
        i += n
    batches.append([SCENE.lines[k] for k in order[i:]])
    assert names_of(SCENE, replica(SCENE.verifier(), [b for b in batches if b], partial=True)) == expected


def test_a_revocation_rebuilds_only_when_it_takes_back_an_applied_line(db):
    """A lost laptop: an admin admits bob's new key, bob writes on with it, then the old key
    is revoked from before those lines. Nothing applied was signed with the old key, so
    nothing is rebuilt; a line the thief signed with it and that was applied is taken back
    by a rebuild."""
    from thrum.store import projection
    from thrum.store.verified import VerifiedFold

    alice, bob = Agent("alice"), Agent("bob")
    root = TeamRoot(log_id=new_log_id(), policy="admins", admins={"alice": alice.public}, members={"bob": bob.public})
    new = keys.generate()
    new_pub = keys.PublicKey(keys.public_raw(new))

    def fold_with(log: list[bytes]) -> VerifiedFold:
        ring = KeyRing()
        return VerifiedFold(Verifier(ring, roster=Roster(ring, root), skew_s=1e9), lines_of=lambda name: list(log))

    def receive(fold: VerifiedFold, log: list[bytes], *lines: bytes) -> None:
        log.extend(x.rstrip(b"\n") for x in lines)
        records = [(ev.segment_path(ev.stream_for(d), 1), d) for d in map(ev.decode_line, lines)]
        fold.received(db, records, [x.rstrip(b"\n") for x in lines])

    admit = alice.line(dated(ev.AgentAdmit(agent_id="bob", by="alice", public_key=new_pub.b64), T0))
    written = ev.encode_line(signing.sign(dated(_msg_key(new_pub, "bob", "the new laptop"), T0 + 3000), "bob", new))
    revoke = alice.line(
        dated(
            ev.AgentRevoke(agent_id="bob", by="alice", public_key=bob.public.b64, from_event=at(T0 + 1000, 0)),
            T0 + 4000,
        )
    )
    registered = bob.line(
        dated(ev.AgentRegister(agent_id="bob", role="reviewer", public_key=bob.public.b64), T0 - 1000)
    )
    log: list[bytes] = []
    fold = fold_with(log)
    receive(fold, log, alice.register(), registered, admit, written)
    assert projection.applied_since(db, "bob", at(T0 + 1000, 0))  # the new laptop's line, applied
    receive(fold, log, revoke)
    assert fold.rejudge is None  # bob's applied line from after the point is the new key's

    thief = bob.line(dated(_msg(bob, "the thief"), T0 + 2000))
    log2: list[bytes] = []
    fold2 = fold_with(log2)
    receive(fold2, log2, alice.register(), registered, admit, written, thief)
    receive(fold2, log2, revoke)
    reason = fold2.take_rejudge()  # what the daemon asks after each batch (Writer.after_facts)
    assert reason and "revoked by alice" in reason  # the thief's applied line is taken back
    assert fold2.take_rejudge() is None  # handed over once: the log is judged again once for it


def test_without_a_root_rotation_and_self_revocation_still_hold():
    bob = Agent("bob")
    new = keys.generate()
    new_pub = keys.PublicKey(keys.public_raw(new))
    ring = KeyRing()
    v = Verifier(ring, skew_s=1e9)
    rotate = bob.line(dated(ev.AgentRotate(agent_id="bob", public_key=new_pub.b64, old_key=bob.public.b64), T0))
    old_after = bob.line(dated(_msg(bob, "old after"), T0 + 10))
    new_after = ev.encode_line(signing.sign(dated(_msg_key(new_pub, "bob", "new"), T0 + 20), "bob", new))
    verdict = v.check([cand(x) for x in (bob.register(), rotate, old_after, new_after)])
    assert [r.kind for r in verdict.rejected] == ["revoked"]
    assert digest(new_after.rstrip(b"\n")) in verdict.fresh

"""The verdict on lines read from the log: which may be applied, which are quarantined.

Rules (docs/design/trust.md):

1. A known event is applied only when it carries ``sig``, its signer is the event's
   author (`thrum.events.event_author`), and the signature verifies against the key
   the ring trusts for that signer — or a verified seal of that signer lists the
   line's hash. Otherwise it is quarantined with a reason:
   ``unsigned``, ``forged``, ``bad-signature``, ``key-conflict``, ``bad-key``,
   ``id-not-owned`` (a message.create whose id is not bound to its signer),
   ``bad-seal``; or held back as *pending* when the signer's key is unknown yet.
2. ``agent.register`` is self-signed: it verifies against the key it carries, which
   the ring then learns (first use) or compares (a different key is a conflict).
   Registrations are judged before the other lines of a batch.
3. Seals are judged before the lines they cover; they are never applied themselves.
4. Unknown types and versions are passed on unjudged (kept, not folded).
6. Admission, rotation, revocation and team management (`roster`, docs/design/trust.md):
   ``agent.admit`` counts when signed by an admin of the team root; a registration
   under a root counts when its key is admitted (else it waits as ``not-admitted``);
   ``agent.rotate`` is signed by the old key; ``agent.revoke`` by an admin or by the
   revoked key itself. A line signed by a key retired at its id is ``revoked``. Under a
   root, removing another agent is an admin's, and changing or deleting a group an
   admin's or its creator's (else ``not-authorized``; a group change waits for its
   group's creation). These facts are judged before the other lines of a batch.
5. A known event dated more than ``skew_s`` ahead of this replica's clock (its
   ``event_id`` or its ``timestamp``: `events.event_time_ms`) is not judged yet: it
   is *future*, held back until its time comes (`thrum.store.verified`), so it can
   win no last-writer-wins state meanwhile (docs/design/trust.md, "Time").
6. A known event naming another log than the team root's is quarantined as
   ``foreign-log`` (`thrum.trust.binding`), before anything else is judged.
7. A line that verifies with none of its signer's keys *known now* (``bad-signature``,
   ``id-not-owned``) may be signed with a key the signer gets later (a rotation or an
   admission that has not arrived yet): callers hold such lines (`RETRY_KINDS`) and
   judge them again when the signer is learned or unblocked, as a rebuild would.

Pure over a `KeyRing`: no trio, no pygit2, no SQL.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from .. import safejson
from ..events.ids import event_time_ms, ulid_prefix
from ..events.shards import event_author
from ..events.schema import SCHEMAS
from ..events.values import EVENT_VERSION
from .binding import LogBinding, foreign_log
from .keys import PublicKey, decode_public
from .ring import KeyRing
from . import teamrules
from .roster import Retirement, Roster
from .signing import SEAL_TYPE, hash_text, id_tag, seal_hashes, signature_of, verify
from .verdicts import digest

__all__ = ["RETRY_KINDS", "Candidate", "Rejected", "Verdict", "Verifier"]

# Refusals a key the signer gets later may overturn (a rotation, an admission of a new
# key): the caller judges those lines again when the signer is learned or unblocked, as a
# rebuild would, so the verdict does not depend on which line came first (rule 7). A
# second registration with another key (``key-conflict``) stays refused: a rotation
# carries its key itself, and name conflicts (issue 30) count those lines once.
RETRY_KINDS = frozenset({"bad-signature", "id-not-owned"})


@dataclass(slots=True)
class Candidate:
    """A line as read: where, its bytes, and its decoded (normalised) event."""

    shard: str
    line: bytes
    event: dict[str, Any]


@dataclass(slots=True)
class Rejected:
    shard: str
    event_id: str
    signer: str
    kind: str
    reason: str
    line: bytes


@dataclass
class Verdict:
    accepted: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    pending: list[Candidate] = field(default_factory=list)  # signer unknown: judge again once learned
    future: list[tuple[Candidate, int]] = field(default_factory=list)  # dated ahead: (line, its time in ms)
    learned: list[str] = field(default_factory=list)
    waiting: list[tuple[Candidate, str, str, str]] = field(default_factory=list)  # (line, kind, wait key, reason)
    unblocked: list[str] = field(default_factory=list)  # wait keys a fact of this batch satisfied
    retired: list[Retirement] = field(default_factory=list)  # keys retired by facts new in this batch
    facts: list[bytes] = field(default_factory=list)  # lines of facts accepted (kept by the caller)
    seals: int = 0
    verified_one_by_one: int = 0
    fresh: list[bytes] = field(default_factory=list)  # digests of lines accepted by a verification now


class Verifier:
    """Judges batches of lines against a ring (see the module rules)."""

    DEFAULT_SKEW_S = 600.0

    def __init__(
        self,
        ring: KeyRing,
        *,
        skew_s: float = DEFAULT_SKEW_S,
        clock: Callable[[], float] = time.time,
        roster: Roster | None = None,
        binding: LogBinding | None = None,
    ):
        self.ring = ring
        self.roster = roster if roster is not None else Roster(ring)
        self.binding = binding or LogBinding()
        self.skew_s = skew_s
        self.clock = clock  # seconds since the epoch (a test may pass its own)

    def horizon_ms(self) -> int:
        """Events dated after this (milliseconds) are held back for now."""
        return int((self.clock() + self.skew_s) * 1000)

    def _ahead(self) -> Callable[[dict[str, Any]], bool]:
        """Whether an event is dated past the horizon, by comparing strings (a rebuild asks
        a million times): a ULID's first 10 characters and an RFC 3339 UTC time to the
        second both sort as the time they carry."""
        horizon = self.horizon_ms()
        ulid_head = ulid_prefix(horizon)
        stamp = datetime.fromtimestamp(horizon // 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")

        def ahead(d: dict[str, Any]) -> bool:
            eid, ts = d.get("event_id"), d.get("timestamp")
            return (isinstance(eid, str) and eid[:10] > ulid_head) or (isinstance(ts, str) and ts[:19] > stamp)

        return ahead

    def check(self, batch: list[Candidate], remembered: set[bytes] | None = None) -> Verdict:
        """The verdict on ``batch``. ``remembered``: digests of lines accepted before
        (`verdicts.VerdictMemory`); those are accepted without a verification."""
        out = Verdict()
        registers, seals, rest = [], [], []
        facts: dict[str, list[Candidate]] = {}
        ahead = self._ahead()
        log_id = self.binding.get()
        for c in batch:
            t = c.event.get("type")
            if t == SEAL_TYPE:
                seals.append(c)
                continue
            known = _known(c.event)
            if known and log_id is not None and "chain" in c.event:
                foreign = foreign_log(c.event, log_id)
                if foreign is not None:
                    self.reject(c, out, "foreign-log", f"{t} by {event_author(c.event) or '?'}: {foreign}")
                    continue
            if known and ahead(c.event):
                out.future.append((c, event_time_ms(c.event)))
            elif t == "agent.register" and known:
                registers.append(c)
            elif known and t in _FACTS:
                facts.setdefault(t, []).append(c)
            else:
                rest.append(c)
        for c in facts.get("agent.admit", ()):
            teamrules.admit(self, c, out)
        for c in registers:
            self._register(c, out)
        for c in sorted(facts.get("agent.rotate", ()), key=lambda c: str(c.event.get("event_id"))):
            teamrules.rotate(self, c, out)
        for c in facts.get("agent.revoke", ()):
            teamrules.revoke(self, c, out)
        rest = facts.get("group.create", []) + rest  # creators first: the management rule asks
        seals_by: dict[str, list[Candidate]] = {}
        for c in seals:
            found = signature_of(c.event)
            if found is None or seal_hashes(c.event) is None or found[0] != c.event.get("agent_id"):
                self.reject(c, out, "bad-seal", "a malformed or unsigned seal")
            else:
                seals_by.setdefault(found[0], []).append(c)
        keys_of: dict[str, list[PublicKey]] = {}  # the facts are judged: no signer's keys change below
        covered = _Seals(self, seals_by, out, keys_of)
        for c in rest:
            self._line(c, out, covered, remembered, keys_of)
        if remembered is None:  # a rebuild need not pay for seals no line asked for
            covered.finish()
        if out.learned:
            self.ring.flush()  # once per batch, before the batch is folded
        return out

    # ------------------------------------------------------------------ judges

    def _register(self, c: Candidate, out: Verdict) -> None:
        d = c.event
        agent = d.get("agent_id", "")
        found = signature_of(d)
        if found is None:
            return self.reject(c, out, "unsigned", f"agent.register of {agent} carries no signature")
        if found[0] != agent:
            return self.reject(c, out, "forged", f"agent.register of {agent} signed by {found[0]}")
        try:
            key = decode_public(d.get("public_key"))
        except ValueError as exc:
            return self.reject(c, out, "bad-key", f"agent.register of {agent}: {exc}")
        if not self.verify_line(c, key, out):
            return self.reject(
                c, out, "bad-signature", f"agent.register of {agent} does not verify against the key it carries"
            )
        admission = self.roster.admission(agent, key, d.get("invite"))
        if admission == "not-admitted":
            return self.wait(
                c,
                out,
                "not-admitted",
                f"admit:{agent}",
                f"{agent} (key {key.b64[:12]}…) is not admitted by the team root; "
                f"an admin admits it with `thrum team admit {agent}`",
            )
        if admission == "admitted":
            if self.ring.key(agent) is None:  # callers that ask the ring for one key find it
                if self.ring.learn(agent, key, d.get("event_id", ""), str(d.get("timestamp", ""))) == "new":
                    out.learned.append(agent)
            out.unblocked.append(agent)
            if d.get("invite"):
                out.facts.append(c.line)
            out.accepted.append((c.shard, d))
            out.fresh.append(digest(c.line))
            return None
        status = self.ring.learn(agent, key, d.get("event_id", ""), str(d.get("timestamp", "")))
        if status == "conflict":
            current = self.ring.key(agent)
            held = current.b64[:12] if current is not None else "?"
            return self.reject(
                c,
                out,
                "key-conflict",
                f"{agent} is already known with key {held}…; a registration with key {key.b64[:12]}… is refused",
            )
        if status == "new":
            out.learned.append(agent)
        out.accepted.append((c.shard, d))
        out.fresh.append(digest(c.line))

    def _line(
        self,
        c: Candidate,
        out: Verdict,
        covered: _Seals,
        remembered: set[bytes] | None,
        keys_of: dict[str, list[PublicKey]],
    ) -> None:
        d = c.event
        if not _known(d):
            out.accepted.append((c.shard, d))  # kept and passed on, never folded
            return None
        dig = digest(c.line)
        roster = self.roster
        if remembered is not None and dig in remembered and roster.plain:  # the rebuild's usual case
            out.accepted.append((c.shard, d))  # judged (and accepted) when it entered
            return None
        author = event_author(d) or ""
        t = d["type"]
        managed = roster.governed and t in _MANAGEMENT
        if remembered is not None and dig in remembered and not roster.has_history(author):
            if not managed or teamrules.may_manage(self, c, author, out):  # a root adopted since asks again
                self._accepted(c, out, None)
            return None
        found = signature_of(d)
        if found is None:
            return self.reject(c, out, "unsigned", f"{t} by {author or '?'} carries no signature")
        signer = found[0]
        if signer != author:
            return self.reject(c, out, "forged", f"{t} written as {author or '?'} but signed by {signer}")
        keys = keys_of.get(signer)
        if keys is None:
            keys = keys_of[signer] = roster.keys(signer)
        if not keys:
            out.pending.append(c)
            return None
        if t == "message.create":  # checked before any verification: it costs none
            mid = d.get("message_id", "")
            tag = id_tag(mid) if isinstance(mid, str) else None
            keys = [k for k in keys if k.tag == tag]
            if not keys:
                return self.reject(c, out, "id-not-owned", f"message id {mid} does not belong to {signer}")
        key = covered.vouching_key(signer, hash_text(dig))
        if key is not None and key not in keys:
            key = None
        if key is None:
            key = next((k for k in keys if self.verify_line(c, k, out)), None)
            if key is None:
                return self.reject(c, out, "bad-signature", f"{t} by {signer} does not verify")
        retired = roster.retired(signer, key, str(d.get("event_id", "")))
        if retired is not None:
            return self.reject(c, out, "revoked", f"{t} by {signer} signed with a key {retired.why}")
        if managed and not teamrules.may_manage(self, c, author, out):
            return None
        self._accepted(c, out, dig)
        return None

    def _accepted(self, c: Candidate, out: Verdict, dig: bytes | None) -> None:
        out.accepted.append((c.shard, c.event))
        if dig is not None:
            out.fresh.append(dig)
        if c.event["type"] == "group.create" and self.roster.learn_creator(c.event["name"], c.event["created_by"]):
            out.unblocked.append(f"group:{c.event['name']}")
            out.facts.append(c.line)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def verify_line(c: Candidate, key: PublicKey, out: Verdict) -> bool:
        """Check the line's own signature over the event exactly as written (not normalised)."""
        out.verified_one_by_one += 1
        try:
            raw = safejson.loads(c.line)
        except ValueError:
            return False
        return isinstance(raw, dict) and verify(raw, key)

    @staticmethod
    def wait(c: Candidate, out: Verdict, kind: str, wait_key: str, reason: str) -> None:
        out.waiting.append((c, kind, wait_key, reason))

    @staticmethod
    def reject(c: Candidate, out: Verdict, kind: str, reason: str) -> None:
        found = signature_of(c.event)
        out.rejected.append(
            Rejected(c.shard, str(c.event.get("event_id", "?")), found[0] if found else "", kind, reason, c.line)
        )


class _Seals:
    """The seals of a batch, each verified only when a line needs it (a rebuild whose
    lines are all remembered verifies none)."""

    def __init__(
        self,
        verifier: Verifier,
        by_signer: dict[str, list[Candidate]],
        out: Verdict,
        keys_of: dict[str, list[PublicKey]],
    ):
        self.verifier = verifier
        self.unchecked = by_signer
        self.out = out
        self.keys_of = keys_of  # signer -> roster.keys(signer), for this batch
        self.hashes: dict[str, dict[str, PublicKey]] = {}  # signer -> line hash -> the key that sealed it

    def vouching_key(self, signer: str, hash_: str) -> PublicKey | None:
        """The key of a verified seal of ``signer`` listing the line, or None."""
        found = self.hashes.get(signer, {}).get(hash_)
        if found is not None:
            return found
        waiting = self.unchecked.get(signer)
        while waiting:  # verify this signer's seals until one covers the line
            seal = waiting.pop()
            if self._check(signer, seal):
                found = self.hashes.get(signer, {}).get(hash_)
                if found is not None:
                    return found
        return None

    def _check(self, signer: str, c: Candidate) -> bool:
        roster = self.verifier.roster
        keys = self.keys_of.get(signer)
        if keys is None:
            keys = self.keys_of[signer] = roster.keys(signer)
        if not keys:
            self.out.pending.append(c)
            return False
        key = next((k for k in keys if self.verifier.verify_line(c, k, self.out)), None)
        if key is None:
            self.verifier.reject(c, self.out, "bad-seal", f"a seal of {signer} does not verify")
            return False
        if roster.retired(signer, key, str(c.event.get("event_id", ""))) is not None:
            return False  # a retired key vouches for nothing: its lines are judged one by one
        held = self.hashes.setdefault(signer, {})
        for h in seal_hashes(c.event) or ():
            held[h] = key
        self.out.seals += 1
        return True

    def finish(self) -> None:
        """Judge the seals no line needed, so a forged seal is still reported."""
        for signer, waiting in self.unchecked.items():
            while waiting:
                self._check(signer, waiting.pop())


_FACTS = frozenset({"agent.admit", "agent.rotate", "agent.revoke", "group.create"})
_MANAGEMENT = frozenset({"agent.cleanup", "group.create", "group.delete", "group.member.add", "group.member.remove"})


def _known(d: dict[str, Any]) -> bool:
    v = d.get("v", 1)
    return d.get("type") in SCHEMAS and isinstance(v, int) and v <= EVENT_VERSION

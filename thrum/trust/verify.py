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
5. A known event dated more than ``skew_s`` ahead of this replica's clock (its
   ``event_id`` or its ``timestamp``: `events.event_time_ms`) is not judged yet: it
   is *future*, held back until its time comes (`thrum.store.verified`), so it can
   win no last-writer-wins state meanwhile (docs/design/trust.md, "Time").
6. A known event naming another log than the team root's is quarantined as
   ``foreign-log`` (`thrum.trust.binding`), before anything else is judged.

Pure over a `KeyRing`: no trio, no pygit2, no SQL.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from .. import safejson
from ..events.ids import event_time_ms, ulid_prefix
from ..events.shards import event_author
from ..events.validation import NORMALISERS
from ..events.values import EVENT_VERSION
from .binding import LogBinding, foreign_log
from .keys import PublicKey, decode_public
from .ring import KeyRing
from .signing import SEAL_TYPE, hash_text, id_is_bound, seal_hashes, signature_of, verify
from .verdicts import digest

__all__ = ["Candidate", "Rejected", "Verdict", "Verifier"]


@dataclass(slots=True)
class Candidate:
    """A line as read: where, its bytes, and its decoded (normalised) event."""

    shard: str
    line: bytes
    event: dict


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
    accepted: list[tuple[str, dict]] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    pending: list[Candidate] = field(default_factory=list)  # signer unknown: judge again once learned
    future: list[tuple[Candidate, int]] = field(default_factory=list)  # dated ahead: (line, its time in ms)
    learned: list[str] = field(default_factory=list)
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
        binding: LogBinding | None = None,
    ):
        self.ring = ring
        self.binding = binding or LogBinding()
        self.skew_s = skew_s
        self.clock = clock  # seconds since the epoch (a test may pass its own)

    def horizon_ms(self) -> int:
        """Events dated after this (milliseconds) are held back for now."""
        return int((self.clock() + self.skew_s) * 1000)

    def _ahead(self) -> Callable[[dict], bool]:
        """Whether an event is dated past the horizon, by comparing strings (a rebuild asks
        a million times): a ULID's first 10 characters and an RFC 3339 UTC time to the
        second both sort as the time they carry."""
        horizon = self.horizon_ms()
        ulid_head = ulid_prefix(horizon)
        stamp = datetime.fromtimestamp(horizon // 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")

        def ahead(d: dict) -> bool:
            eid, ts = d.get("event_id"), d.get("timestamp")
            return (isinstance(eid, str) and eid[:10] > ulid_head) or (isinstance(ts, str) and ts[:19] > stamp)

        return ahead

    def check(self, batch: list[Candidate], remembered: set[bytes] | None = None) -> Verdict:
        """The verdict on ``batch``. ``remembered``: digests of lines accepted before
        (`verdicts.VerdictMemory`); those are accepted without a verification."""
        out = Verdict()
        registers, seals, rest = [], [], []
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
                    self._reject(c, out, "foreign-log", f"{t} by {event_author(c.event) or '?'}: {foreign}")
                    continue
            if known and ahead(c.event):
                out.future.append((c, event_time_ms(c.event)))
            elif t == "agent.register" and known:
                registers.append(c)
            else:
                rest.append(c)
        for c in registers:
            self._register(c, out)
        seals_by: dict[str, list[Candidate]] = {}
        for c in seals:
            found = signature_of(c.event)
            if found is None or seal_hashes(c.event) is None or found[0] != c.event.get("agent_id"):
                self._reject(c, out, "bad-seal", "a malformed or unsigned seal")
            else:
                seals_by.setdefault(found[0], []).append(c)
        covered = _Seals(self, seals_by, out)
        for c in rest:
            self._line(c, out, covered, remembered)
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
            return self._reject(c, out, "unsigned", f"agent.register of {agent} carries no signature")
        if found[0] != agent:
            return self._reject(c, out, "forged", f"agent.register of {agent} signed by {found[0]}")
        try:
            key = decode_public(d.get("public_key"))
        except ValueError as exc:
            return self._reject(c, out, "bad-key", f"agent.register of {agent}: {exc}")
        if not self._verify_line(c, key, out):
            return self._reject(
                c, out, "bad-signature", f"agent.register of {agent} does not verify against the key it carries"
            )
        status = self.ring.learn(agent, key, d.get("event_id", ""), str(d.get("timestamp", "")))
        if status == "conflict":
            current = self.ring.key(agent)
            held = current.b64[:12] if current is not None else "?"
            return self._reject(
                c,
                out,
                "key-conflict",
                f"{agent} is already known with key {held}…; a registration with key {key.b64[:12]}… is refused",
            )
        if status == "new":
            out.learned.append(agent)
        out.accepted.append((c.shard, d))
        out.fresh.append(digest(c.line))

    def _line(self, c: Candidate, out: Verdict, covered: _Seals, remembered: set[bytes] | None) -> None:
        d = c.event
        if not _known(d):
            out.accepted.append((c.shard, d))  # kept and passed on, never folded
            return None
        dig = digest(c.line)
        if remembered is not None and dig in remembered:  # judged (and accepted) when it entered
            out.accepted.append((c.shard, d))
            return None
        author = event_author(d) or ""
        found = signature_of(d)
        if found is None:
            return self._reject(c, out, "unsigned", f"{d['type']} by {author or '?'} carries no signature")
        signer = found[0]
        if signer != author:
            return self._reject(c, out, "forged", f"{d['type']} written as {author or '?'} but signed by {signer}")
        key = self.ring.key(signer)
        if key is None:
            out.pending.append(c)
            return None
        if d["type"] == "message.create" and not id_is_bound(d.get("message_id", ""), key):
            return self._reject(c, out, "id-not-owned", f"message id {d.get('message_id')} does not belong to {signer}")
        if covered.vouches(signer, hash_text(dig)):
            out.accepted.append((c.shard, d))
            out.fresh.append(dig)
            return None
        if not self._verify_line(c, key, out):
            return self._reject(c, out, "bad-signature", f"{d['type']} by {signer} does not verify")
        out.accepted.append((c.shard, d))
        out.fresh.append(dig)
        return None

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _verify_line(c: Candidate, key: PublicKey, out: Verdict) -> bool:
        """Check the line's own signature over the event exactly as written (not normalised)."""
        out.verified_one_by_one += 1
        try:
            raw = safejson.loads(c.line)
        except ValueError:
            return False
        return isinstance(raw, dict) and verify(raw, key)

    @staticmethod
    def _reject(c: Candidate, out: Verdict, kind: str, reason: str) -> None:
        found = signature_of(c.event)
        out.rejected.append(
            Rejected(c.shard, str(c.event.get("event_id", "?")), found[0] if found else "", kind, reason, c.line)
        )


class _Seals:
    """The seals of a batch, each verified only when a line needs it (a rebuild whose
    lines are all remembered verifies none)."""

    def __init__(self, verifier: Verifier, by_signer: dict[str, list[Candidate]], out: Verdict):
        self.verifier = verifier
        self.unchecked = by_signer
        self.out = out
        self.hashes: dict[str, set[str]] = {}

    def vouches(self, signer: str, hash_: str) -> bool:
        if hash_ in self.hashes.get(signer, ()):
            return True
        waiting = self.unchecked.get(signer)
        while waiting:  # verify this signer's seals until one covers the line
            seal = waiting.pop()
            if self._check(signer, seal) and hash_ in self.hashes.get(signer, ()):
                return True
        return False

    def _check(self, signer: str, c: Candidate) -> bool:
        key = self.verifier.ring.key(signer)
        if key is None:
            self.out.pending.append(c)
            return False
        if not self.verifier._verify_line(c, key, self.out):
            self.verifier._reject(c, self.out, "bad-seal", f"a seal of {signer} does not verify")
            return False
        self.hashes.setdefault(signer, set()).update(seal_hashes(c.event) or ())
        self.out.seals += 1
        return True

    def finish(self) -> None:
        """Judge the seals no line needed, so a forged seal is still reported."""
        for signer, waiting in self.unchecked.items():
            while waiting:
                self._check(signer, waiting.pop())


def _known(d: dict) -> bool:
    v = d.get("v", 1)
    return d.get("type") in NORMALISERS and isinstance(v, int) and v <= EVENT_VERSION

"""Signing on behalf of local agents, and the seals that vouch for what they appended.

The daemon is the only writer, so it signs every event with the key of the agent
who wrote it (docs/design/trust.md). Rules:

1. An event is signed before it is queued for the writer, so an agent without a
   key on this machine fails alone with a clear error, never a whole group commit.
2. The daemon can act only for agents whose private key is here: a name registered
   from another machine is not this daemon's to speak for. Nor with a key this
   replica knows is retired at the event's id (a revocation, or a rotation done on
   another machine): every replica would quarantine the line as ``revoked`` and
   `thrum verify` would fail the push that carries it, so the write is refused
   (`errors.KeyRetired`). Checked when the write comes in and again right before it
   is signed, since a revocation may be learned in between (a sync, or one queued
   ahead of it: the writer folds a retiring write before signing what follows).
   ``agent.revoke`` is the exception, as for the verifier: a key may always retire
   itself from an earlier point (a stolen key, found out late).
3. Every event is a link of its author's chain (`thrum.trust.chains`): the next
   ``seq`` and the hash of the author's previous event, chosen in the writer's
   thread right before the append (`sign_batch`), so the order of the file is the
   order of the chain, and a batch that fails to append uses up no position.
   An author's tip is read from the projection once (its events written before a
   restart) and then kept here; the same key writing on another machine meanwhile
   makes a fork, reported as one (docs/design/trust.md, "Chains").
4. Every line appended is remembered (per file and signer) until the next commit,
   when `take_seals` turns each group into one seal line: other replicas then verify
   one signature per group instead of one per line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import threading
from collections import defaultdict
from collections.abc import Callable

from .. import errors
from .. import events as ev
from ..trust import signing
from ..trust.chains import sig_hash
from ..trust.keys import LocalKeys, PublicKey

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..trust.roster import Retirement, Roster

__all__ = ["Signer"]


# Types whose signer's key the verifier never judges retired: a key may revoke itself from any point.
_ANY_KEY = frozenset({"agent.revoke"})
# Writes that retire a key: the writer folds them before it signs anything queued after them.
RETIRING = frozenset({"agent.revoke", "agent.rotate"})


class Signer:
    def __init__(self, keys: LocalKeys, log_id: Callable[[], str | None] | None = None, roster: Roster | None = None):
        """``roster``: the team's keys over time, to refuse a retired key (None: never retired)."""
        self.keys = keys
        self.log_id = log_id or (lambda: None)  # the team root's log id, named in every chain
        self.roster = roster
        self._tips: dict[str, tuple[int, str]] = {}  # author -> (seq, hash) of its last event written here
        self._lock = threading.Lock()
        self._unsealed: dict[tuple[str, str], list[str]] = defaultdict(list)

    def _pair(self, name: str) -> tuple[Ed25519PrivateKey, PublicKey]:
        pair = self.keys.require(name) if name else None  # RefusedKey: a key file it will not use
        if pair is None:
            raise errors.IdentityError(
                f"agent {name!r} has no key on this machine, so this daemon cannot act for it "
                f"(it was registered elsewhere, or its key file .thrum/identities/{name}.key is gone); "
                f"act as an identity of this machine, or copy {name}.json and {name}.key from the "
                f"machine that has them"
            )
        return pair

    def tag(self, name: str) -> bytes:
        """The key tag that binds ``name``'s new message ids to it."""
        tag: bytes = self._pair(name)[1].tag
        return tag

    def new_message_id(self, name: str) -> str:
        return signing.new_message_id(self.tag(name))

    def check(self, d: dict[str, Any]) -> None:
        """Raise unless this machine may sign ``d`` (rule 2; when it is queued, and before it is signed).

        Raises:
            IdentityError: its author has no key here. KeyRetired: that key is retired at ``d``'s id.
        """
        author = ev.event_author(d) or ""
        public = self._pair(author)[1]
        if d.get("type") in _ANY_KEY:
            return
        retired = self._retirement(author, public, str(d.get("event_id", "")))
        if retired is not None:
            raise _refusal(retired, governed=self.roster is not None and self.roster.governed)

    def may_sign(self, agent: str) -> bool:
        """Whether an event ``agent`` wrote now could be signed here (a heartbeat, a receipt,
        a session's end: work done of the daemon's own accord skips an agent that may not)."""
        pair = self.keys.get(agent)
        return pair is not None and self._retirement(agent, pair[1], ev.new_ulid()) is None

    def signing_agents(self) -> list[str]:
        """The local agents that `may_sign` now (whose receipts the daemon writes: one refused
        receipt would fail the write that carries everyone's)."""
        return [name for name in self.keys.names() if self.may_sign(name)]

    def _retirement(self, agent: str, public: PublicKey, event_id: str) -> Retirement | None:
        return self.roster.retired(agent, public, event_id) if self.roster is not None else None

    def sign_batch(
        self, events: list[dict[str, Any]], stored_tip: Callable[[str], tuple[int, str]]
    ) -> tuple[list[dict[str, Any]], Callable[[], None]]:
        """The events chained and signed, and a function to call once they are durable
        (it moves the tips on). ``stored_tip(author)``: (seq, hash) the projection holds.

        Raises:
            IdentityError: an author has no key on this machine (nothing is used up).
        """
        log_id = self.log_id()
        moved: dict[str, tuple[int, str]] = {}
        out = []
        for d in events:
            author = ev.event_author(d) or ""
            pair = self.keys.get(author)  # cached: `check` read (and vetted) the key file when the write came in
            private, _ = pair if pair is not None else self._pair(author)
            tip = moved.get(author) or self._tips.get(author)
            if tip is None:  # first event of this author since the daemon started: the projection knows
                tip = stored_tip(author)
            seq, prev = tip
            chain: dict[str, Any] = {"seq": seq + 1}
            if seq:
                chain["prev"] = prev
            if log_id:
                chain["log"] = log_id
            signed, signature = signing.signed({**d, "chain": chain}, author, private)
            moved[author] = (seq + 1, sig_hash(signature))
            out.append(signed)

        def durable() -> None:
            self._tips.update(moved)

        return out, durable

    # ------------------------------------------------------------------ seals

    def appended(self, shard: str, d: dict[str, Any], line: bytes) -> None:
        """Remember a line the writer appended (called in the writer's thread)."""
        by = (d.get("sig") or {}).get("by") if isinstance(d.get("sig"), dict) else None
        if by:
            with self._lock:
                self._unsealed[(shard, by)].append(signing.line_hash(line))

    def take_seals(self) -> list[tuple[str, bytes]]:
        """(shard, seal line) for every group of unsealed lines; the groups are forgotten."""
        with self._lock:
            groups, self._unsealed = self._unsealed, defaultdict(list)
        out = []
        for (shard, by), hashes in sorted(groups.items()):
            pair = self.keys.get(by)
            if pair is None or not hashes or not self.may_sign(by):
                continue  # the key went away or was retired (its seal vouches for nothing): verified one by one
            out.append((shard, ev.encode_line(signing.make_seal(by, hashes, pair[0]))))
        return out


def _refusal(r: Retirement, *, governed: bool) -> errors.KeyRetired:
    """What a writer with a retired key hears: what happened, and how it writes again."""
    when = _time_of(r.point)
    name = r.name
    if r.why.startswith("rotated"):
        fix = (
            f"this machine holds only the old key (a rotation here puts the new one in place in a moment: "
            f"try again); copy .thrum/identities/{name}.key from the machine that rotated it, or use that machine"
        )
    elif governed:
        fix = (
            f"to write as {name} again, an admin re-admits it with a new key: the admin runs "
            f"`thrum team invite {name}`, then here `thrum quickstart --name {name} --role ROLE --invite CODE` "
            f"(the revoked key is kept beside the new one)"
        )
    else:
        fix = (
            f"without a team root every replica keeps the first key it saw for {name}: write under a new "
            f"name (`thrum quickstart --name NEW --role ROLE`), or adopt a root (`thrum team init`) and have "
            f"an admin re-admit {name} with a new key (`thrum team invite {name}`)"
        )
    return errors.KeyRetired(
        f"agent {name!r} may not write: its key {r.key[:12]}… was {r.why}"
        + (f" ({when})" if when else "")
        + f", and every replica refuses what it signs from then on, so nothing was written; {fix}",
        data={"agent": name, "key": r.key, "point": r.point, "why": r.why, "since": when},
    )


def _time_of(point: str) -> str:
    """A retirement's point (an event id, or a time's id prefix) as an RFC 3339 time ('' if unreadable)."""
    try:
        return ev.ms_rfc3339(ev.ulid_ms(point))
    except (KeyError, TypeError):
        return ""

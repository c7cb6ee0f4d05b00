"""Signing on behalf of local agents, and the seals that vouch for what they appended.

The daemon is the only writer, so it signs every event with the key of the agent
who wrote it (docs/design/trust.md). Rules:

1. An event is signed before it is queued for the writer, so an agent without a
   key on this machine fails alone with a clear error, never a whole group commit.
2. The daemon can act only for agents whose private key is here: a name registered
   from another machine is not this daemon's to speak for.
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

__all__ = ["Signer"]


class Signer:
    def __init__(self, keys: LocalKeys, log_id: Callable[[], str | None] | None = None):
        self.keys = keys
        self.log_id = log_id or (lambda: None)  # the team root's log id, named in every chain
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
        """Raise `IdentityError` unless this machine can sign ``d`` (before it is queued)."""
        self._pair(ev.event_author(d) or "")

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
            if pair is None or not hashes:
                continue  # the key went away: those lines are verified one by one elsewhere
            out.append((shard, ev.encode_line(signing.make_seal(by, hashes, pair[0]))))
        return out

"""Signing on behalf of local agents, and the seals that vouch for what they appended.

The daemon is the only writer, so it signs every event with the key of the agent
who wrote it (docs/design/trust.md). Rules:

1. An event is signed before it is queued for the writer, so an agent without a
   key on this machine fails alone with a clear error, never a whole group commit.
2. The daemon can act only for agents whose private key is here: a name registered
   from another machine is not this daemon's to speak for.
3. Every line appended is remembered (per file and signer) until the next commit,
   when `take_seals` turns each group into one seal line: other replicas then verify
   one signature per group instead of one per line.
"""

from __future__ import annotations

import threading
from collections import defaultdict

from .. import errors
from .. import events as ev
from ..trust import signing
from ..trust.keys import LocalKeys

__all__ = ["Signer"]


class Signer:
    def __init__(self, keys: LocalKeys):
        self.keys = keys
        self._lock = threading.Lock()
        self._unsealed: dict[tuple[str, str], list[str]] = defaultdict(list)

    def _pair(self, name: str):
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
        return self._pair(name)[1].tag

    def new_message_id(self, name: str) -> str:
        return signing.new_message_id(self.tag(name))

    def sign(self, d: dict) -> dict:
        """``d`` signed by its author (`thrum.events.event_author`).

        Raises:
            IdentityError: the author has no key on this machine.
        """
        author = ev.event_author(d) or ""
        private, _ = self._pair(author)
        return signing.sign(d, author, private)

    # ------------------------------------------------------------------ seals

    def appended(self, shard: str, d: dict, line: bytes) -> None:
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

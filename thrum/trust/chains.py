"""Per-writer chains: every signer's events numbered and linked, so omission shows.

A remote (or a replica forwarding history) can withhold lines, drop them, or show
two machines different histories of one key; signatures alone cannot tell (each
line it does show verifies). So each event a signer writes carries, covered by its
signature (docs/design/trust.md, "Chains"):

    "chain": {"seq": 410, "prev": "<hash of the signer's event #409>", "log": "<log id>"}

Rules:

1. ``seq`` counts the signer's events from 1, over every file it writes to; ``prev``
   is `sig_hash` of its previous event (absent at #1); ``log`` is the team root's log
   id, when there is a root (`thrum.trust.binding`).
2. A link names its predecessor by the hash of its *signature*, not of its line: a
   signature covers the event's canonical form, so respelling a line (key order,
   escapes) changes neither its signature nor the chain, while any change to what
   the event says does.
3. What a replica concludes, whatever order lines arrive in (the same set of events
   gives the same report):

   - *gap*: positions below the highest seen that no event holds
     ("missing alice #408–409 (seen #410)");
   - *fork*: two different events at one position, or an event whose ``prev`` is not
     the hash of the event before it (equivocation: the key is used on two machines,
     or was stolen), with both events as evidence;
   - neither quarantines a line: every event still verifies on its own; chains say
     what is missing or contradictory.
4. Events written before chains (no ``chain`` field) stay valid; a writer's chain
   starts at its first event written after the upgrade.

Pure: no SQL, no git (the tracking tables are `thrum.store.chain_fold`).
"""

from __future__ import annotations

import base64
import bisect
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .signing import signature_of

MAX_SEQ = (1 << 53) - 1

__all__ = ["Link", "RangeFault", "Spans", "gap_text", "link_of", "range_faults", "sig_hash", "unsure_signers"]


def sig_hash(signature: bytes) -> str:
    """The name a chain gives an event: the first 16 bytes of SHA-256 of its raw
    signature, base64url without padding (22 characters)."""
    return base64.urlsafe_b64encode(hashlib.sha256(signature).digest()[:16]).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class Link:
    """One event's place in its signer's chain."""

    signer: str
    seq: int
    prev: str  # "" at #1
    hash: str  # sig_hash of this event
    event_id: str
    log: str  # "" when the event names no log


def link_of(d: dict[str, Any]) -> Link | None:
    """The chain link of a (normalised, signed) event, or None when it carries none."""
    chain = d.get("chain")
    if chain is None:
        return None
    found = signature_of(d)
    if found is None:
        return None
    return Link(
        found[0],
        chain["seq"],
        chain.get("prev") or "",
        sig_hash(found[1]),
        str(d.get("event_id", "")),
        chain.get("log") or "",
    )


class Spans:
    """The positions of one signer's chain that a replica holds, as sorted disjoint
    closed ranges ``[(lo, hi), ...]``; text form ``"1-407,410"``."""

    __slots__ = ("ranges",)

    def __init__(self, ranges: list[tuple[int, int]] | None = None):
        self.ranges = ranges or []

    @classmethod
    def parse(cls, text: str) -> Spans:
        out = []
        for part in filter(None, text.split(",")):
            lo, _, hi = part.partition("-")
            out.append((int(lo), int(hi or lo)))
        return cls(out)

    def text(self) -> str:
        return ",".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in self.ranges)

    def add(self, seqs: list[int]) -> None:
        """Add positions (any order, duplicates allowed)."""
        if not seqs:
            return
        merged: list[tuple[int, int]] = []
        new = sorted(set(seqs))
        runs: list[tuple[int, int]] = []
        lo = hi = new[0]
        for s in new[1:]:
            if s == hi + 1:
                hi = s
            else:
                runs.append((lo, hi))
                lo = hi = s
        runs.append((lo, hi))
        for lo, hi in sorted(self.ranges + runs):
            if merged and lo <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        self.ranges = merged

    def holds(self, seq: int) -> bool:
        i = bisect.bisect_right(self.ranges, (seq, MAX_SEQ)) - 1
        return i >= 0 and self.ranges[i][0] <= seq <= self.ranges[i][1]

    def high(self) -> int:
        return self.ranges[-1][1] if self.ranges else 0

    def gaps(self) -> list[tuple[int, int]]:
        """Missing ranges below the highest position held (from #1)."""
        out = []
        expect = 1
        for lo, hi in self.ranges:
            if lo > expect:
                out.append((expect, lo - 1))
            expect = hi + 1
        return out

    def missing(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.gaps())


def gap_text(signer: str, lo: int, hi: int, seen: int) -> str:
    """ "missing alice #408–409 (seen #410)"."""
    where = f"#{lo}" if lo == hi else f"#{lo}–{hi}"
    return f"missing {signer} {where} (seen #{seen})"


@dataclass(frozen=True, slots=True)
class RangeFault:
    """What a range of added events does to its signers' chains (`range_faults`)."""

    event_id: str  # the added event the fault is shown on
    signer: str
    kind: str  # "fork", "broken-link" or "gap"
    reason: str


def _by_seq(links: Iterable[Link]) -> dict[str, dict[int, dict[str, Link]]]:
    out: dict[str, dict[int, dict[str, Link]]] = {}
    for ln in links:
        out.setdefault(ln.signer, {}).setdefault(ln.seq, {})[ln.hash] = ln
    return out


def unsure_signers(added: Iterable[Link], held: Iterable[Link]) -> set[str]:
    """Signers of ``added`` whose range cannot be judged from ``held`` alone: an added
    position at or below the newest one held (a fork, or a hole filled?) that ``held``
    says nothing about, or whose predecessor it lacks. The caller gathers every line of
    those signers and asks again (rare: an honest push appends above each tip)."""
    a, h = _by_seq(added), _by_seq(held)
    out = set()
    for signer, at in a.items():
        mine = h.get(signer, {})
        tip = max(mine, default=0)
        for seq in at:
            if seq <= tip and seq not in mine:
                out.add(signer)
            elif 1 < seq <= tip + 1 and seq - 1 not in mine and seq - 1 not in at:
                out.add(signer)
    return out


def range_faults(added: Iterable[Link], held: Iterable[Link]) -> list[RangeFault]:
    """Forks, broken links and gaps that ``added`` (the events a push adds) makes in its
    signers' chains, given the events of those signers held before (``held``: at least
    every signer's newest ones; `unsure_signers` says when more are needed).

    - *fork*: an added event at a position another event (held or added) holds;
    - *broken-link*: an added event whose ``prev`` is not the hash of any event at the
      position before it;
    - *gap*: positions above the newest one held and below the newest one added that
      nothing holds ("missing alice #408–409 (seen #410)"), shown on the added event
      right after each run. Holes below the newest position held are not the range's.
    """
    a, h = _by_seq(added), _by_seq(held)
    out: list[RangeFault] = []
    for signer in sorted(a):
        at = a[signer]
        mine = {
            seq: {k: v for k, v in links.items() if k not in at.get(seq, {})}
            for seq, links in h.get(signer, {}).items()
        }
        tip = max((seq for seq, links in mine.items() if links), default=0)
        for seq in sorted(at):
            here = {**mine.get(seq, {}), **at[seq]}
            before = {**mine.get(seq - 1, {}), **at.get(seq - 1, {})}
            for ln in sorted(at[seq].values(), key=lambda x: x.event_id):
                others = sorted(x.event_id for k, x in here.items() if k != ln.hash)
                if others:
                    out.append(
                        RangeFault(
                            ln.event_id,
                            signer,
                            "fork",
                            f"{signer} #{seq} is held by two events: {ln.event_id} and {', '.join(others[:3])} "
                            "(the key signs on two machines, or was stolen)",
                        )
                    )
                elif seq > 1 and before and ln.prev not in before:
                    held_ids = ", ".join(sorted(x.event_id for x in before.values())[:3])
                    out.append(
                        RangeFault(
                            ln.event_id,
                            signer,
                            "broken-link",
                            f"{signer} #{seq} does not follow the #{seq - 1} held ({held_ids}): "
                            f"another history of {signer} exists",
                        )
                    )
        above = sorted(seq for seq in at if seq > tip)
        if not above:
            continue
        top, expect = above[-1], tip + 1
        for seq in above:
            if seq > expect:
                first = min(at[seq].values(), key=lambda x: x.event_id)
                out.append(RangeFault(first.event_id, signer, "gap", gap_text(signer, expect, seq - 1, top)))
            expect = seq + 1
    return out

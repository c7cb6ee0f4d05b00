"""What a key retired now takes back: whether the log holds a line it covers.

A retirement (a revocation, a rotation) changes only the verdicts of the lines it
covers — its agent's, from its point on, signed with that key — and the projection can
take a line back only by folding everything else again (a rebuild). So the fold asks
first whether the log holds such a line (docs/design/trust.md, "Re-judging after a
retirement or a root change"). Rules:

1. Lines are compared parsed, never by their spelling: a remote may respell a line
   (key order, escapes) and its signature still holds.
2. A ``message.create`` whose id is not bound to the retired key was not signed with it
   if it was applied (an applied message's id is bound to its signer's key): no
   verification. Every other candidate costs one (~70 µs).
3. Past `MAX_CHECKS` candidates the answer is "maybe": the caller rebuilds.
4. The lines that may be an agent's are its own streams and the shared ``events``
   stream (a segment only carries events of its own agent: `events.allowed_in_shard`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .. import events as ev
from .. import safejson
from ..trust.keys import decode_public
from ..trust.roster import Retirement
from ..trust.signing import id_is_bound, signature_of, verify
from .log import EventLog

__all__ = ["MAX_CHECKS", "author_lines", "signed_with"]

MAX_CHECKS = 20_000  # verifications before the answer is "maybe" (a rebuild is cheaper by then)


def signed_with(r: Retirement, lines: Iterable[bytes]) -> str | None:
    """Why ``lines`` may hold a line ``r`` covers (its event, or that there were too many
    to check), or None when they hold none."""
    key = decode_public(r.key)
    checked = 0
    for line in lines:
        try:
            raw = safejson.loads(line)
        except ValueError:
            continue
        if not isinstance(raw, dict) or not isinstance(raw.get("event_id"), str) or raw["event_id"] < r.point:
            continue
        found = signature_of(raw)
        if found is None or found[0] != r.name:
            continue
        if raw.get("type") == "message.create" and not id_is_bound(str(raw.get("message_id", "")), key):
            continue
        checked += 1
        if checked > MAX_CHECKS:
            return f"more than {MAX_CHECKS} lines to check"
        if verify(raw, key):
            return f"{raw.get('type')} {raw['event_id']}"
    return None


def author_lines(event_log: EventLog, name: str) -> Iterator[bytes]:
    """Every line of the log that may be ``name``'s (rule 4)."""
    for shard in event_log.shards():
        owner = ev.shard_owner(shard)
        if owner is None or owner == name:
            yield from event_log.iter_lines(shard)

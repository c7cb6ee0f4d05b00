"""Shard and authorship rules: which file of the log an event lives in, and who may write it.

An event lives in the shard of the agent that caused it; only that agent's replica
appends to it:

- ``messages/{agent}.jsonl``: message.create/edit/delete, thread.create (by its
  creator) and agent.update;
- ``receipts/{agent}.jsonl``: that agent's read / unread / archive marks;
- ``events.jsonl``: lifecycle and group events (and those written for the system).

The fold trusts nothing it reads, so the inverse holds too: a shard only carries
events of its own agent and kind (`allowed_in_shard`). `ShardRule` is that check
with the shard path parsed once, for loops that judge many events of one shard.
"""

from __future__ import annotations

from typing import Any

from .names import NAME_RE
from .validation import NORMALISERS

MESSAGE_SHARD_TYPES = frozenset({"message.create", "message.edit", "message.delete",
                                 "thread.create", "agent.update"})
RECEIPT_TYPES = frozenset({"message.read", "message.unread", "message.archive"})


def event_owner(d: dict[str, Any]) -> str | None:
    """The agent an event's shard must belong to (None for events.jsonl events)."""
    t = d.get("type")
    if t in MESSAGE_SHARD_TYPES or t in RECEIPT_TYPES:
        return d.get("created_by") if t == "thread.create" else d.get("agent_id")
    return None


def event_author(d: dict[str, Any]) -> str | None:
    """Who wrote an event, and so who must have signed it (docs/design/trust.md)."""
    t = d.get("type")
    if t in ("thread.create", "group.create"):
        return d.get("created_by")
    if t == "group.delete":
        return d.get("deleted_by")
    if t == "agent.cleanup":
        return d.get("by") or d.get("agent_id")
    return d.get("agent_id")  # every other type, seals included


def shard_for(d: dict[str, Any]) -> str:
    """Relative path of the shard file this event is appended to."""
    t = d.get("type")
    if t in MESSAGE_SHARD_TYPES:
        return f"messages/{event_owner(d)}.jsonl"
    if t in RECEIPT_TYPES:
        return f"receipts/{d['agent_id']}.jsonl"
    return "events.jsonl"


def shard_owner(shard: str) -> str | None:
    """Inverse of `shard_for`: the agent a shard path belongs to, or None for events.jsonl.

    Raises:
        ValueError: the path is not a shard thrum writes.
    """
    if shard == "events.jsonl":
        return None
    for prefix in ("messages/", "receipts/"):
        if shard.startswith(prefix) and shard.endswith(".jsonl"):
            name = shard[len(prefix):-len(".jsonl")]
            if NAME_RE.fullmatch(name):
                return name
    raise ValueError(f"not a thrum shard: {shard!r}")


def shard_kind(shard: str) -> str:
    """``events``, ``messages`` or ``receipts`` (the first path segment)."""
    return "events" if shard == "events.jsonl" else shard.split("/", 1)[0]


class ShardRule:
    """The authorship rule of one shard, its path parsed once.

    `allows` is called once per event a rebuild folds, so it is a few comparisons.
    A path that is not a shard thrum writes allows no known event.
    """

    __slots__ = ("kind", "owner")

    def __init__(self, shard: str):
        try:
            self.owner = shard_owner(shard)
            self.kind = shard_kind(shard)
        except ValueError:
            self.owner, self.kind = None, "invalid"

    def allows(self, d: dict[str, Any]) -> bool:
        """True when ``d`` may live in this shard; unknown types are kept, not judged."""
        t = d.get("type")
        if t in MESSAGE_SHARD_TYPES:
            return self.kind == "messages" and self.owner == (d.get("created_by") if t == "thread.create"
                                                              else d.get("agent_id"))
        if t in RECEIPT_TYPES:
            return self.kind == "receipts" and self.owner == d.get("agent_id")
        if t in NORMALISERS:
            return self.kind == "events"
        return True


def allowed_in_shard(d: dict[str, Any], shard: str) -> bool:
    """The authorship rule: a shard only carries events of its own agent and kind."""
    return ShardRule(shard).allows(d)

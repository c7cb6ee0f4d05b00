"""The log's layout and authorship rules: which stream an event belongs to, which
files make up a stream, and who may write them (docs/design/trust.md, merge.md).

An event belongs to the *stream* of the agent that caused it; only that agent's
replicas append to it:

- ``messages/{agent}``: message.create/edit/delete, thread.create (by its
  creator) and agent.update;
- ``receipts/{agent}``: that agent's read / unread / archive marks, its
  delivery states (delivered, surfaced, acked: docs/design/delivery.md) and its
  heartbeats (docs/design/presence.md);
- ``events``: lifecycle and group events (and those written for the system).

Each event type's Struct says which (`thrum.events.schema`: ``STREAM``, and ``OWNER``, the
field naming the agent), and who wrote it (``AUTHOR``); the lists here are derived from them.

The streams' files and their segments are `thrum.events.layout`.

The fold trusts nothing it reads, so the inverse holds too: a segment only carries
events of its own agent and kind (`allowed_in_shard`). `ShardRule` is that check
with the path parsed once, for loops that judge many events of one file.
"""

from __future__ import annotations

from typing import Any

from .layout import (
    EVENTS_STREAM,
    shard_kind,
    shard_owner,
)
from .schema import SCHEMAS

__all__ = [
    "MESSAGE_SHARD_TYPES",
    "RECEIPT_TYPES",
    "ShardRule",
    "allowed_in_shard",
    "event_author",
    "event_owner",
    "stream_for",
]

# Derived from the schema (each Struct's STREAM, OWNER and AUTHOR).
MESSAGE_SHARD_TYPES = frozenset(t for t, c in SCHEMAS.items() if c.STREAM == "messages")
RECEIPT_TYPES = frozenset(t for t, c in SCHEMAS.items() if c.STREAM == "receipts")
_KIND: dict[Any, str] = {t: c.STREAM for t, c in SCHEMAS.items()}
_OWNER: dict[Any, str] = {t: c.OWNER for t, c in SCHEMAS.items() if c.STREAM != "events"}
_AUTHOR: dict[Any, tuple[str, ...]] = {t: c.AUTHOR for t, c in SCHEMAS.items() if c.AUTHOR != ("agent_id",)}


def event_owner(d: dict[str, Any]) -> str | None:
    """The agent whose stream an event belongs to (None for the shared ``events`` stream)."""
    field = _OWNER.get(d.get("type"))
    return d.get(field) if field is not None else None


def event_author(d: dict[str, Any]) -> str | None:
    """Who wrote an event, and so who must have signed it (docs/design/trust.md)."""
    fields = _AUTHOR.get(d.get("type"))
    if fields is None:
        return d.get("agent_id")  # every other type, seals included
    author: str | None = None
    for field in fields:
        author = d.get(field)
        if author:
            break
    return author


def stream_for(d: dict[str, Any]) -> str:
    """The stream an event is appended to: ``events``, ``messages/{agent}`` or ``receipts/{agent}``."""
    t = d.get("type")
    field = _OWNER.get(t)
    if field is None:
        return EVENTS_STREAM
    return f"{_KIND[t]}/{d[field]}"


class ShardRule:
    """The authorship rule of one segment (or stream), its path parsed once.

    `allows` is called once per event a rebuild folds, so it is a few comparisons.
    A path that is not part of the layout allows no known event.
    """

    __slots__ = ("kind", "owner")

    def __init__(self, path_or_stream: str):
        try:
            self.owner = shard_owner(path_or_stream)
            self.kind = shard_kind(path_or_stream)
        except ValueError:
            self.owner, self.kind = None, "invalid"

    def allows(self, d: dict[str, Any]) -> bool:
        """True when ``d`` may live in this segment; unknown types are kept, not judged."""
        t = d.get("type")
        field = _OWNER.get(t)
        if field is not None:
            return self.kind == _KIND[t] and self.owner == d.get(field)
        if t in SCHEMAS:
            return self.kind == EVENTS_STREAM
        return True


def allowed_in_shard(d: dict[str, Any], path_or_stream: str) -> bool:
    """The authorship rule: a segment only carries events of its own agent and kind."""
    return ShardRule(path_or_stream).allows(d)

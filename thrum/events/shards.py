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

A stream is stored as size-capped *segments*, ``{stream}/{n}.jsonl`` with ``n`` a
zero-padded number from ``000001``: the writer appends to the highest segment
until it reaches the cap, then starts the next one (`thrum.store.log`). So no file
grows with the history, and an event stays in the segment it was written to.

Every segment path has exactly one spelling (`segment_path`); `parse_log_path`
accepts only that spelling, so the set of files the layout knows is closed: a
fetched tree's other entries are ignored, never read or written.

The fold trusts nothing it reads, so the inverse holds too: a segment only carries
events of its own agent and kind (`allowed_in_shard`). `ShardRule` is that check
with the path parsed once, for loops that judge many events of one file.
"""

from __future__ import annotations

import re
from typing import Any

from .names import NAME_RE
from .schema import SCHEMAS

# Derived from the schema (each Struct's STREAM, OWNER and AUTHOR).
MESSAGE_SHARD_TYPES = frozenset(t for t, c in SCHEMAS.items() if c.STREAM == "messages")
RECEIPT_TYPES = frozenset(t for t, c in SCHEMAS.items() if c.STREAM == "receipts")
_KIND: dict[Any, str] = {t: c.STREAM for t, c in SCHEMAS.items()}
_OWNER: dict[Any, str] = {t: c.OWNER for t, c in SCHEMAS.items() if c.STREAM != "events"}
_AUTHOR: dict[Any, tuple[str, ...]] = {t: c.AUTHOR for t, c in SCHEMAS.items() if c.AUTHOR != ("agent_id",)}

EVENTS_STREAM = "events"
AGENT_KINDS_OF_STREAMS = ("messages", "receipts")  # the kinds of stream that belong to one agent
SEGMENT_SUFFIX = ".jsonl"
SEGMENT_DIGITS = 6
MAX_SEGMENT = 999_999_999  # 9 digits at most: the name stays short and parses as a plain int
_SEGMENT_RE = re.compile(r"(?:0{0,5}[1-9][0-9]{0,8})\.jsonl")


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


def segment_name(n: int) -> str:
    """``000001.jsonl`` for 1: the one spelling of segment ``n``."""
    if not 1 <= n <= MAX_SEGMENT:
        raise ValueError(f"segment number out of range: {n}")
    return f"{n:0{SEGMENT_DIGITS}d}{SEGMENT_SUFFIX}"


def segment_number(name: str) -> int | None:
    """The number of a segment file name in its one spelling, else None."""
    if not _SEGMENT_RE.fullmatch(name):
        return None
    n = int(name[: -len(SEGMENT_SUFFIX)])
    return n if segment_name(n) == name else None


def segment_path(stream: str, n: int) -> str:
    """Relative path of segment ``n`` of ``stream``."""
    check_stream(stream)
    return f"{stream}/{segment_name(n)}"


def check_stream(stream: str) -> None:
    """Raises ValueError unless ``stream`` is ``events``, ``messages/{agent}`` or ``receipts/{agent}``."""
    if stream == EVENTS_STREAM:
        return
    kind, sep, name = stream.partition("/")
    if not sep or kind not in AGENT_KINDS_OF_STREAMS or not NAME_RE.fullmatch(name):
        raise ValueError(f"not a thrum stream: {stream!r}")


def parse_log_path(path: str) -> tuple[str, int]:
    """``(stream, n)`` of a segment path of the layout.

    Raises:
        ValueError: the path is not a file thrum writes (wrong shape, name, spelling).
    """
    stream, sep, name = path.rpartition("/")
    n = segment_number(name) if sep else None
    if n is None:
        raise ValueError(f"not a thrum log file: {path!r}")
    check_stream(stream)
    return stream, n


def is_log_path(path: str) -> bool:
    """True for the layout's own file paths: the only files thrum reads, writes or materialises."""
    try:
        parse_log_path(path)
    except ValueError:
        return False
    return True


def stream_of(path_or_stream: str) -> str:
    """The stream of a segment path, or the stream itself.

    Raises:
        ValueError: neither a segment path nor a stream.
    """
    try:
        check_stream(path_or_stream)
        return path_or_stream
    except ValueError:
        return parse_log_path(path_or_stream)[0]


def shard_owner(path_or_stream: str) -> str | None:
    """The agent a segment (or stream) belongs to, or None for the ``events`` stream.

    Raises:
        ValueError: not a path or stream of the layout.
    """
    stream = stream_of(path_or_stream)
    return None if stream == EVENTS_STREAM else stream.split("/", 1)[1]


def shard_kind(path_or_stream: str) -> str:
    """``events``, ``messages`` or ``receipts``.

    Raises:
        ValueError: not a path or stream of the layout.
    """
    return stream_of(path_or_stream).split("/", 1)[0]


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

"""The log's file layout: which paths make up the streams (``events``,
``messages/{agent}``, ``receipts/{agent}``) and their size-capped segments
``{stream}/{n}.jsonl`` (`thrum.events.shards` says which events belong where).

Every segment path has exactly one spelling (`segment_path`); `parse_log_path`
accepts only that spelling, so the set of files the layout knows is closed: a
fetched tree's other entries are ignored, never read or written.

Apart from `thrum.events.shards` because it needs no event type: `thrum init` and
the sync worktree (`is_log_path`) load it without the schema (~25 ms of CPU, the
msgspec Structs of every event type, a third of `thrum init`'s own work).
"""

from __future__ import annotations

import re

from .names import NAME_RE

EVENTS_STREAM = "events"
AGENT_KINDS_OF_STREAMS = ("messages", "receipts")  # the kinds of stream that belong to one agent
SEGMENT_SUFFIX = ".jsonl"
SEGMENT_DIGITS = 6
MAX_SEGMENT = 999_999_999  # 9 digits at most: the name stays short and parses as a plain int
_SEGMENT_RE = re.compile(r"(?:0{0,5}[1-9][0-9]{0,8})\.jsonl")


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

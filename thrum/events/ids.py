"""Ids and time: ULIDs, prefixed ids, RFC 3339 timestamps and their sort keys.

Event ids are ULIDs and they are the universal dedup key; last-writer-wins rules
compare them, so one process never makes two that sort out of creation order.
Timestamps are RFC 3339 UTC; `time_key` makes any accepted form sort by instant.
"""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timezone

from ulid import ULID

ULID_RE = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_ID_BODY = r"[0-9A-Za-z_\-]{1,80}"
MESSAGE_ID_RE = re.compile(r"msg_" + _ID_BODY)
SESSION_ID_RE = re.compile(r"(?:ses|s)_" + _ID_BODY)
THREAD_ID_RE = re.compile(r"(?:thr|thread)_" + _ID_BODY)
GROUP_ID_RE = re.compile(r"grp_" + _ID_BODY)
TIMESTAMP_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})"
)

_ulid_lock = threading.Lock()
_last_ulid = 0


def new_ulid() -> str:
    """A ULID that is strictly greater than every ULID this process made before.

    Last-writer-wins rules compare event ids, so two events made in the same
    millisecond by one writer must still sort in the order they were made.
    """
    global _last_ulid
    with _ulid_lock:
        now_ms = time.time_ns() // 1_000_000
        candidate = int(ULID.from_timestamp(now_ms / 1000))
        # Keep the timestamp part exact; random part from the library.
        candidate = (now_ms << 80) | (candidate & ((1 << 80) - 1))
        if candidate <= _last_ulid:
            candidate = _last_ulid + 1
        _last_ulid = candidate
        return str(ULID.from_int(candidate))


def new_id(prefix: str) -> str:
    """``msg_``/``ses_``/``thr_``/``grp_`` + ULID."""
    return f"{prefix}_{new_ulid()}"


def now_rfc3339() -> str:
    """Current UTC time, millisecond precision, ``Z`` suffix."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def parse_time(value: str) -> datetime:
    """RFC 3339 string to an aware datetime (used for display and sorting only)."""
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    return datetime.fromisoformat(value)


def time_key(value: str) -> str:
    """A string that sorts like the instant ``value`` names: UTC, milliseconds, ``Z``.

    That is the form `now_rfc3339` writes, so our own timestamps are their own key.
    Other producers may write seconds only, more digits or an offset; as plain
    strings those do not sort by time ("...:00Z" sorts after "...:00.5Z"). Values
    that do not parse are returned unchanged.
    """
    if len(value) == 24 and value[23] == "Z" and value[19] == ".":
        return value
    try:
        dt = parse_time(value).astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return value
    return (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:"
            f"{dt.second:02d}.{dt.microsecond // 1000:03d}Z")

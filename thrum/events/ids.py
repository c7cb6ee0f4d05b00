"""Ids and time: ULIDs, prefixed ids, RFC 3339 timestamps and their sort keys.

Event ids are ULIDs and they are the universal dedup key; last-writer-wins rules
compare them, so one process never makes two that sort out of creation order.
Timestamps are RFC 3339 UTC; `time_key` makes any accepted form sort by instant.
"""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import datetime, timezone

ULID_RE = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_ID_BODY = r"[0-9A-Za-z_\-]{1,80}"
MESSAGE_ID_RE = re.compile(r"msg_" + _ID_BODY)
SESSION_ID_RE = re.compile(r"(?:ses|s)_" + _ID_BODY)
THREAD_ID_RE = re.compile(r"(?:thr|thread)_" + _ID_BODY)
GROUP_ID_RE = re.compile(r"grp_" + _ID_BODY)
# A client's name for one logical write (message.create, message.edit): a repeat of the
# key by the same agent is the same write (thrum/daemon/idempotency.py). Optional; kept
# in the event so that it survives restarts and rebuilds with the log.
IDEMPOTENCY_KEY_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# Strict RFC 3339 in UTC: ASCII digits only (``\d`` would also take other scripts'
# digits), a ``Z`` zone, at most nanoseconds. `is_valid_timestamp` adds the calendar.
TIMESTAMP_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z")
MIN_YEAR, MAX_YEAR = 2000, 2099  # a sane range: nothing honest is older, a clock past 2099 is broken

_ulid_lock = threading.Lock()
_last_ulid = 0


def new_ulid() -> str:
    """A ULID that is strictly greater than every ULID this process made before.

    Last-writer-wins rules compare event ids, so two events made in the same
    millisecond by one writer must still sort in the order they were made.
    """
    global _last_ulid
    random = int.from_bytes(os.urandom(10), "big")  # 80 random bits, as the ULID spec (and library) take them
    with _ulid_lock:
        candidate = ((time.time_ns() // 1_000_000) << 80) | random
        if candidate <= _last_ulid:
            candidate = _last_ulid + 1
        _last_ulid = candidate
    return ulid_text(candidate)


_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32, as ULIDs spell it
_CROCKFORD = {c: i for i, c in enumerate(_ALPHABET)}
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]  # 10 bits -> two digits


def ulid_text(value: int) -> str:
    """The 26 characters of the 128-bit ULID ``value`` (as ``str(ULID.from_int(value))``
    spells it, at a third of its cost: every event, message and thread id is made here)."""
    p = _PAIRS
    return (
        p[value >> 120]
        + p[(value >> 110) & 1023]
        + p[(value >> 100) & 1023]
        + p[(value >> 90) & 1023]
        + p[(value >> 80) & 1023]
        + p[(value >> 70) & 1023]
        + p[(value >> 60) & 1023]
        + p[(value >> 50) & 1023]
        + p[(value >> 40) & 1023]
        + p[(value >> 30) & 1023]
        + p[(value >> 20) & 1023]
        + p[(value >> 10) & 1023]
        + p[value & 1023]
    )


def ulid_ms(value: str) -> int:
    """The milliseconds since the epoch that a ULID carries (its first 10 characters).

    Raises:
        KeyError: not Crockford base32 (callers pass validated ids).
    """
    n = 0
    for c in value[:10]:
        n = n * 32 + _CROCKFORD[c]
    return n


def ulid_prefix(ms: int) -> str:
    """The first 10 characters of every ULID made at millisecond ``ms`` (they sort by time)."""
    out = []
    for _ in range(10):
        out.append(_ALPHABET[ms & 31])
        ms >>= 5
    return "".join(reversed(out))


def ulid_after(value: str, at_least_ms: int = 0) -> str:
    """A fresh ULID that sorts after ``value`` (and carries at least ``at_least_ms``): what a
    last-writer-wins event must have to win over ``value``, even one dated ahead of this clock."""
    from ulid import ULID  # noqa: PLC0415 - rare (a last-writer-wins write); not every process pays its import

    fresh = int(ULID.from_str(new_ulid()))
    floor = max(int(ULID.from_str(value)) + 1, at_least_ms << 80)
    return ulid_text(max(fresh, floor))


def event_time_ms(d: dict[str, object]) -> int:
    """When an event says it happened, in milliseconds: the later of its ``event_id``'s
    time and its ``timestamp`` (either may be what a writer dated ahead). 0 when neither parses."""
    best = 0
    eid = d.get("event_id")
    if isinstance(eid, str) and ULID_RE.fullmatch(eid):
        best = ulid_ms(eid)
    ts = d.get("timestamp")
    if isinstance(ts, str):
        try:
            best = max(best, int(parse_time(ts).timestamp() * 1000))
        except (ValueError, OverflowError):
            pass
    return best


def new_id(prefix: str) -> str:
    """``msg_``/``ses_``/``thr_``/``grp_`` + ULID."""
    return f"{prefix}_{new_ulid()}"


_SECOND: tuple[int, str] = (-1, "")  # the last whole second formatted (a tuple: swapped atomically)


def now_rfc3339() -> str:
    """Current UTC time, millisecond precision, ``Z`` suffix.

    The date and time of day are formatted once per second: a send stamps several times
    (the event, the fold, delivery), and `strftime` was most of the cost."""
    global _SECOND
    ns = time.time_ns()
    sec, ms = divmod(ns // 1_000_000, 1000)
    cached = _SECOND
    if cached[0] != sec:
        cached = _SECOND = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    return f"{cached[1]}.{ms:03d}Z"


def ms_rfc3339(ms: int) -> str:
    """A time in milliseconds since the epoch as people read it in a message: UTC, whole seconds, ``Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))


def is_valid_timestamp(value: object) -> bool:
    """True for a real instant in strict RFC 3339 UTC between MIN_YEAR and MAX_YEAR.

    Impossible dates and times (month 13, hour 25, second 61) and far-future years
    are refused: an event dated 9999 would sit on top of every inbox for ever.
    """
    if not isinstance(value, str) or not TIMESTAMP_RE.fullmatch(value):
        return False
    try:
        year = int(value[0:4])
        datetime(year, int(value[5:7]), int(value[8:10]), int(value[11:13]), int(value[14:16]), int(value[17:19]))
    except ValueError:
        return False
    return MIN_YEAR <= year <= MAX_YEAR


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
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:"
        f"{dt.second:02d}.{dt.microsecond // 1000:03d}Z"
    )

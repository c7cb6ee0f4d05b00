"""Encoding and decoding: one event is one compact JSON object on one line.

`decode_line` is the only way a log line becomes an event: it parses and validates
it, and anything that is not a valid event raises `MalformedEvent`, which the fold
counts and skips while the line stays in the file. A line is first decoded by the
schema (`thrum.events.schema`: typed, checked in C while parsing); a line the schema
does not take goes to the general path (`safejson` + `normalise`, the same Structs),
which keeps an unknown type or future version as written, reads the few leniencies
the schema declares, and words the precise error. Both paths give one answer
(tests/test_events_schema.py), so which one decided never shows.
"""

from __future__ import annotations

import json
from typing import Any

from .. import safejson
from ..errors import ValidationError
from . import schema
from .validation import normalise
from .values import MAX_LINE_BYTES

try:  # orjson is a declared dependency; the fallback keeps the pure core importable anywhere.
    from orjson import dumps as _orjson_dumps
    from orjson import loads as _orjson_loads

    _HAVE_ORJSON = True
except ImportError:  # pragma: no cover
    _HAVE_ORJSON = False


class MalformedEvent(ValueError):
    """A log line that is not a valid event (kept in the file, skipped by the fold)."""


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes, no trailing newline."""
    if _HAVE_ORJSON:
        return _orjson_dumps(obj)
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def loads(data: bytes | str) -> Any:
    if _HAVE_ORJSON:
        return _orjson_loads(data)
    return json.loads(data)


def encode_line(d: dict[str, Any]) -> bytes:
    """One event dict to one JSONL line (with the trailing newline)."""
    return dumps(d) + b"\n"


def decode_line(line: bytes | str) -> dict[str, Any]:
    """Parse and validate one log line.

    Raises:
        MalformedEvent: not JSON, not an object, or not a valid event.
    """
    if len(line) > MAX_LINE_BYTES:
        raise MalformedEvent("line too long")
    # (msgspec takes nesting in `sig` deeper than the checked path's limit: such a line is its)
    brackets = line.count(b"[") + line.count(b"{") if type(line) is bytes else safejson.MAX_DEPTH + 1
    if brackets <= safejson.MAX_DEPTH or not safejson.too_deep(line):
        try:
            return schema.decode(line)
        except Exception:  # noqa: BLE001 - refused or unusual: the checked path decides, and says why
            pass
    return decode_checked(line)


def decode_checked(line: bytes | str) -> dict[str, Any]:
    """`decode_line` without the fast path: parse, then `normalise` (the general path: for
    the lines the fast path does not take, and what the fast path is tested against).

    Raises:
        MalformedEvent: as `decode_line`.
    """
    if len(line) > MAX_LINE_BYTES:
        raise MalformedEvent("line too long")
    try:
        raw = safejson.loads(line)
    except ValueError as exc:
        raise MalformedEvent(f"not JSON: {exc}") from None
    try:
        return normalise(raw)
    except ValidationError as exc:
        raise MalformedEvent(exc.message) from None
    except Exception as exc:  # noqa: BLE001 - the log is untrusted: no line may escape as a crash
        raise MalformedEvent(f"invalid event ({type(exc).__name__}: {str(exc)[:120]})") from None

"""JSON from untrusted sources, with limits that hold before any parser recurses.

Rules:

1. Nesting deeper than `MAX_DEPTH` is refused by a non-recursive scan *before* a
   parser sees the text: the stdlib parser recurses once per level and a
   50,000-deep array raises ``RecursionError`` (not ``ValueError``), which
   callers that expect bad input to be a ``ValueError`` would not contain.
2. Every failure is a `ValueError` (`JSONLimitError` or the parser's own), so one
   ``except ValueError`` contains any bad input.
3. The parser is orjson (a declared dependency); the stdlib parser stands in only
   where orjson is missing. NaN and Infinity are not JSON and are refused.

Pure: no I/O, no trio, no pygit2.
"""

from __future__ import annotations

import json
from typing import Any

try:  # a declared dependency; the fallback keeps this module importable anywhere
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None  # type: ignore[assignment]

MAX_DEPTH = 128  # arrays/objects inside each other; no honest thrum document comes close

__all__ = ["JSONLimitError", "MAX_DEPTH", "loads", "too_deep"]


class JSONLimitError(ValueError):
    """The text is nested deeper than the limit (or otherwise over a limit)."""


def too_deep(text: bytes | str, max_depth: int = MAX_DEPTH) -> bool:
    """True when brackets outside strings nest deeper than ``max_depth``.

    Linear, no recursion. Quotes and backslashes are ASCII, so scanning UTF-8
    bytes is exact; a ``str`` is scanned as its characters.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return False
    depth = 0
    in_string = escaped = False
    for c in data:
        if in_string:
            if escaped:
                escaped = False
            elif c == 0x5C:  # backslash
                escaped = True
            elif c == 0x22:  # quote
                in_string = False
        elif c == 0x22:
            in_string = True
        elif c == 0x5B or c == 0x7B:
            depth += 1
            if depth > max_depth:
                return True
        elif c == 0x5D or c == 0x7D:
            depth -= 1
    return False


def loads(text: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON from an untrusted source.

    Raises:
        ValueError: not JSON, not UTF-8, or nested deeper than ``max_depth``
            (`JSONLimitError`). Never ``RecursionError``.
    """
    if too_deep(text, max_depth):
        raise JSONLimitError(f"nested deeper than {max_depth} levels")
    if _orjson is not None:
        return _orjson.loads(text)
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:  # unreachable after the scan; kept so the contract holds regardless
        raise JSONLimitError(f"nested deeper than {max_depth} levels") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")

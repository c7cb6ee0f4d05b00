"""The small pieces every CLI view is built from: untrusted text made safe, times, widths, tables.

Pure (no I/O): ``now`` is passed in where the text depends on it. Widths are
display widths (east Asian wide characters take two columns, combining marks
none), so columns line up in a terminal.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timezone
from typing import Any, Iterable

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    c = ord(match.group())
    return "\\x%02x" % c if c < 0x100 else "\\u%04x" % c


def clean(text: Any) -> str:
    """Untrusted text made safe for a terminal (tabs expanded, controls visible).

    Escaped: C0 and C1 controls (but newline and tab), and Unicode's bidirectional
    controls (embeddings, overrides, isolates, marks) and line/paragraph separators,
    which would reorder or break what follows them on the reader's screen.
    """
    text = "" if text is None else str(text)
    text = text.replace("\r\n", "\n").expandtabs(4)
    return _CONTROL.sub(_visible, text)


def parse_time(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def relative_time(value: Any, now: datetime | None = None) -> str:
    """``just now``, ``5m ago``, ``3h ago``, ``2d ago``; older than a week: ``Jan 2`` (``Jan 2 2025``)."""
    dt = parse_time(value)
    if dt is None:
        return str(value or "-")
    now = now or datetime.now(timezone.utc)
    secs = (now - dt).total_seconds()
    if secs < 60:
        return "just now"
    if secs < 3600:
        return f"{int(secs // 60)}m ago"
    if secs < 86400:
        return f"{int(secs // 3600)}h ago"
    if secs < 7 * 86400:
        return f"{int(secs // 86400)}d ago"
    local = dt.astimezone(now.tzinfo)
    label = f"{local:%b} {local.day}"
    return label if local.year == now.year else f"{label} {local.year}"


def duration(seconds: Any) -> str:
    """``45s``, ``5m 12s``, ``2h 3m``, ``3d 4h``."""
    try:
        s = int(float(seconds))
    except (TypeError, ValueError):
        return str(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def display_width(text: str) -> int:
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def at(name: Any) -> str:
    name = str(name or "?")
    return name if name.startswith("@") else f"@{name}"


def tag_text(tag: Any) -> str:
    if isinstance(tag, dict):
        return f"{tag.get('type', '?')}:{tag.get('value', '?')}"
    return str(tag)


def table(headers: list[str], rows: Iterable[list[Any]]) -> str:
    rows = [[clean(c) if c not in (None, "") else "-" for c in row] for row in rows]
    widths = [display_width(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], display_width(cell))
    lines = ["  ".join(pad(h, widths[i]) for i, h in enumerate(headers)).rstrip()]
    for row in rows:
        lines.append("  ".join(pad(c, widths[i]) for i, c in enumerate(row)).rstrip())
    return "\n".join(lines)

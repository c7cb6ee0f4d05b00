"""Tags: the ``{type, value}`` pairs that are a message's scopes and refs.

One definition of what a tag is, used by every place that reads one: the event
normalisers (log and write path), the daemon's RPC parameters, the query filters
and the CLI's ``--scope``/``--ref`` flags. Each caller words its own error (a CLI
usage error, an RPC parameter error); what counts as a tag is decided here.
Importing it costs nothing but `re` (it is on the CLI's start-up path).
"""

from __future__ import annotations

import re

TAG_TYPE_RE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
MAX_TAG_VALUE = 4096


def is_tag_type(value: object) -> bool:
    """A tag type as the log stores it: ``[A-Za-z0-9_.-]{1,64}``."""
    return isinstance(value, str) and TAG_TYPE_RE.fullmatch(value) is not None


def is_tag_value(value: object) -> bool:
    """A tag value as the log stores it: a non-empty string of at most `MAX_TAG_VALUE` characters."""
    return isinstance(value, str) and 0 < len(value) <= MAX_TAG_VALUE


def split_tag(text: str, *, strip: bool = False) -> tuple[str, str] | None:
    """``"type:value"`` (as typed on a command line) → ``(type, value)``.

    The value may itself contain colons. ``strip`` trims spaces around both sides.
    None when there is no colon or either side is empty.
    """
    kind, sep, value = text.partition(":")
    if strip:
        kind, value = kind.strip(), value.strip()
    if not sep or not kind or not value:
        return None
    return kind, value


def tag_fields(value: object) -> tuple[str, str] | None:
    """A ``{"type", "value"}`` object, or a ``(type, value)`` pair → ``(type, value)``.

    None unless both are non-empty strings (the pattern of the type is checked where
    the tag becomes an event, by the normalisers).
    """
    if isinstance(value, dict):
        kind, text = value.get("type"), value.get("value")
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        kind, text = value
    else:
        return None
    if not isinstance(kind, str) or not kind or not isinstance(text, str) or not text:
        return None
    return kind, text

"""The checks of one field of an event: strings, choices, agent names, tag lists, bodies, id lists.

Each takes the raw event (``Raw``: a dict as JSON gives it, untrusted) and a
key, and returns the field's value normalised (defaults filled, duplicates in
lists dropped, order kept) or raises `ValidationError` naming the field
(`fail`). The per-type normalisers (`thrum.events.validation`) are built from
these; nothing here knows an event type.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from .. import safejson
from ..errors import ValidationError
from .ids import MESSAGE_ID_RE
from .names import NAME_RE, UNUSABLE_NAMES
from .tags import is_tag_type, is_tag_value
from .values import FORMATS, MAX_CONTENT_BYTES, MAX_IDS, MAX_REFS

Raw = dict[str, Any]  # an event as JSON gives it: validated here, never trusted before


def fail(field_name: str, why: str) -> NoReturn:
    raise ValidationError(f"{field_name}: {why}", field=field_name)


def str_field(
    d: Raw,
    key: str,
    *,
    required: bool = True,
    pattern: re.Pattern[str] | None = None,
    max_len: int = 4096,
    default: str = "",
) -> str:
    value = d.get(key, None)
    if value is None:
        if required:
            fail(key, "is required")
        return default
    if not isinstance(value, str):
        fail(key, "must be a string")
    if required and not value:
        fail(key, "must not be empty")
    if len(value) > max_len:
        fail(key, f"is longer than {max_len} characters")
    if pattern is not None and value and not pattern.fullmatch(value):
        fail(key, f"invalid value {value[:80]!r}")
    return value


def choice_field(d: Raw, key: str, choices: tuple[str, ...], default: str) -> str:
    value = d.get(key, default)
    if value is None or value == "":
        value = default
    if not isinstance(value, str) or value not in choices:
        fail(key, f"must be one of {', '.join(choices)} (got {str(value)[:40]!r})")
    return value


def agent_field(d: Raw, key: str = "agent_id") -> str:
    """An agent's name, as every event that names one must have it: the pattern, and
    never a reserved name or ``everyone`` (no agent may be called that, whoever wrote
    the line: the local RPC and the log keep one rule)."""
    value = d.get(key)
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        fail(key, f"invalid agent id {str(value)[:80]!r}")
    if value in UNUSABLE_NAMES:
        fail(key, f"{value!r} is reserved: no agent may be called that")
    return value


def tag_list(d: Raw, key: str) -> list[Raw]:
    value = d.get(key) or []
    if not isinstance(value, list):
        fail(key, "must be a list of {type, value} objects")
    if len(value) > MAX_REFS:
        fail(key, f"has more than {MAX_REFS} entries")
    out = []
    seen = set()
    for item in value:
        if not isinstance(item, dict):
            fail(key, "entries must be {type, value} objects")
        t, v = item.get("type"), item.get("value")
        if not is_tag_type(t):
            fail(key, f"invalid type {str(t)[:40]!r}")
        if not is_tag_value(v):
            fail(key, f"invalid value for type {t!r}")
        if (t, v) not in seen:
            seen.add((t, v))
            out.append({"type": t, "value": v})
    return out


def body_field(d: Raw) -> Raw:
    body = d.get("body")
    if not isinstance(body, dict):
        fail("body", "must be an object with format and content")
    fmt = choice_field(body, "format", FORMATS, "markdown")
    content = body.get("content")
    if not isinstance(content, str):
        fail("body.content", "must be a string")
    if len(content) > MAX_CONTENT_BYTES:
        fail("body.content", "is too large")
    structured = body.get("structured") or ""
    if not isinstance(structured, str):
        fail("body.structured", "must be a JSON string")
    if structured:
        try:
            safejson.loads(structured)
        except ValueError as exc:
            fail("body.structured", f"is not valid JSON ({str(exc)[:80]})")
    return {"format": fmt, "content": content, "structured": structured}


def id_list(d: Raw, key: str = "message_ids") -> list[str]:
    value = d.get(key)
    if not isinstance(value, list) or not value:
        fail(key, "must be a non-empty list of message ids")
    if len(value) > MAX_IDS:
        fail(key, f"has more than {MAX_IDS} entries")
    out = []
    seen = set()
    for item in value:
        if not isinstance(item, str) or not MESSAGE_ID_RE.fullmatch(item):
            fail(key, f"invalid message id {str(item)[:80]!r}")
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


# A chain link names its predecessor by the first 16 bytes of SHA-256 of its signature,
# base64url without padding (`thrum.trust.chains.sig_hash`); a log id is what the trust
# root says (letters, digits, ``_``, ``-``, ``.``, ``:``).
CHAIN_HASH_RE = re.compile(r"[A-Za-z0-9_-]{22}")
LOG_ID_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
MAX_CHAIN_SEQ = (1 << 53) - 1  # what every JSON reader keeps exact


def chain_field(value: Any) -> Raw:
    """The ``chain`` of an event: its signer's sequence number (``seq``, from 1), the hash
    of the signer's previous event (``prev``, from the second on) and the log it was
    written for (``log``, when the team has a root). Returned as written when valid."""
    if type(value) is not dict:
        fail("chain", "must be an object")
    seq, prev, log_id = value.get("seq"), value.get("prev"), value.get("log")
    if type(seq) is not int or not 1 <= seq <= MAX_CHAIN_SEQ:
        fail("chain", "seq must be a whole number from 1")
    if seq == 1:
        if prev is not None:
            fail("chain", "the first event of a chain has no prev")
    elif type(prev) is not str or not CHAIN_HASH_RE.fullmatch(prev):
        fail("chain", "prev must be the 22-character hash of the signer's previous event")
    if log_id is not None and (type(log_id) is not str or not LOG_ID_RE.fullmatch(log_id)):
        fail("chain", "log must be a log id (letters, digits, _ - . :)")
    if len(value) > (seq > 1) + 1 + (log_id is not None):
        fail("chain", "may hold only seq, prev and log")
    return value

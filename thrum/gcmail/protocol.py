"""The exec provider's wire formats (pure): the stdin payload in, Message objects out.

Rules:

1. A Message is ``{id, from, to, subject, body, created_at, read}`` plus
   ``thread_id``, ``reply_to`` and ``priority`` when they have a value (Gas City
   ignores what it does not know and treats a missing key as empty).
2. ``to`` is the mailbox the message was addressed to: its first ``mention`` ref
   (a gc-mail message has exactly one); ``read`` is that mailbox's read state.
3. Priorities follow Gas City's beads (0 most urgent … 4): thrum ``critical`` 0,
   ``high`` 1, ``low`` 3; ``normal`` is left out, as Gas City's own mail has none.
4. Output is one compact JSON document; an empty list prints nothing.
"""

from __future__ import annotations

import json

from .addresses import from_name

TYPE_CHECKING = False  # not typing's: the provider starts without importing typing
if TYPE_CHECKING:
    from typing import Any, Callable

    Display = Callable[[str], "str | None"]

PRIORITY_NUMBERS = {"critical": 0, "high": 1, "low": 3}
REQUIRED = ("id", "from", "to", "subject", "body", "created_at", "read")



class PayloadError(ValueError):
    """The stdin of send or reply is not the object Gas City sends."""


def parse_payload(raw: bytes) -> tuple[str, str, str]:
    """``(from, subject, body)`` from the stdin of send/reply.

    Raises:
        PayloadError: not one JSON object, a field that is not a string, or no sender.
    """
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PayloadError(f"stdin is not a JSON object ({exc})") from None
    if not isinstance(doc, dict):
        raise PayloadError("stdin must be a JSON object with from, subject and body")
    fields = []
    for key in ("from", "subject", "body"):
        value = doc.get(key)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise PayloadError(f"{key!r} in stdin must be a string")
        fields.append(value)
    if not fields[0].strip():
        raise PayloadError("'from' in stdin is empty: every message needs a sender")
    return fields[0], fields[1], fields[2]


def first_mention(refs: Any) -> str:
    """The value of the first ``mention`` ref (the mailbox a message went to), or ''."""
    for ref in refs or ():
        if isinstance(ref, dict) and ref.get("type") == "mention" and ref.get("value"):
            return str(ref["value"])
    return ""


def mentions(refs: Any) -> list[str]:
    return [str(r["value"]) for r in refs or () if isinstance(r, dict) and r.get("type") == "mention" and r.get("value")]


def message(item: dict, *, display: Display, to: str | None = None, read: bool | None = None) -> dict:
    """A Gas City Message from a thrum message (a message.list/thread item or message.get's message).

    ``to``: the address to report (an inbox listing knows it); otherwise the first
    mention, decoded. ``read``: the read state to report; otherwise whether the
    addressed mailbox is among ``read_by`` (message.get), else ``is_read``.
    """
    author = item.get("agent_id") or (item.get("author") or {}).get("agent_id") or ""
    box = first_mention(item.get("refs"))
    if to is None:
        to = from_name(box, display(box)) if box else ""
    if read is None:
        read_by = item.get("read_by")
        read = box in read_by if isinstance(read_by, list) and box else bool(item.get("is_read"))
    body = item.get("body") if isinstance(item.get("body"), dict) else {}
    out = {
        "id": item.get("message_id", ""),
        "from": from_name(author, display(author)) if author else "",
        "to": to,
        "subject": item.get("subject") or "",
        "body": body.get("content") or "",
        "created_at": item.get("created_at") or "",
        "read": bool(read),
    }
    if item.get("thread_id"):
        out["thread_id"] = item["thread_id"]
    if item.get("reply_to"):
        out["reply_to"] = item["reply_to"]
    number = PRIORITY_NUMBERS.get(item.get("priority") or "normal")
    if number is not None:
        out["priority"] = number
    return out


def dumps(doc: Any) -> bytes:
    """One compact JSON document as UTF-8 (nothing at all for an empty list)."""
    if doc is None or (isinstance(doc, list) and not doc):
        return b""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

"""The exec provider's wire formats (pure): the stdin payload in, Message objects out.

Rules:

1. A Message is ``{id, from, to, subject, body, created_at, read}`` plus
   ``thread_id``, ``reply_to`` and ``priority`` when they have a value (Gas City
   ignores what it does not know and treats a missing key as empty).
2. ``to`` is the address of the mailbox the message was sent to: its first
   ``mention`` ref naming a Gas City mailbox, else its first ``mention`` (Gas City
   mail has exactly one); ``read`` is that mailbox's.
3. Priorities follow Gas City's beads (0 most urgent … 4): thrum ``critical`` 0,
   ``high`` 1, ``low`` 3; ``normal`` is left out, as Gas City's own mail has none.
4. Output is one compact JSON document; an empty list prints nothing.
"""

from __future__ import annotations

import json

from .addresses import is_mailbox

TYPE_CHECKING = False  # not typing's: the provider starts without importing typing
if TYPE_CHECKING:
    from typing import Any, Callable

    Address = Callable[[str], str]

PRIORITY_NUMBERS = {"critical": 0, "high": 1, "low": 3}


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
    """The mailbox a message went to: its first ``mention`` ref naming a Gas City
    mailbox, else its first ``mention`` ref, else ''."""
    values = mentions(refs)
    return next((v for v in values if is_mailbox(v)), values[0] if values else "")


def mentions(refs: Any) -> list[str]:
    """Every ``mention`` ref value, in order."""
    return [
        str(r["value"]) for r in refs or () if isinstance(r, dict) and r.get("type") == "mention" and r.get("value")
    ]


def message(
    item: dict[str, Any], *, address: Address, to: str | None = None, read: bool | None = None
) -> dict[str, Any]:
    """A Gas City Message from a thrum message (a mailbox.list or message.thread item, or message.get's message).

    ``address`` turns a thrum name into a Gas City address. ``to``: the address to
    report (a mailbox listing knows it); otherwise the first mention's. ``read``:
    the read state to report; otherwise the mailbox's (``mailbox.read``), else ``is_read``.
    """
    author = item.get("agent_id") or (item.get("author") or {}).get("agent_id") or ""
    if to is None:
        box = first_mention(item.get("refs"))
        to = address(box) if box else ""
    if read is None:
        state = item.get("mailbox")
        read = state.get("read") if isinstance(state, dict) else item.get("is_read")
    body = item.get("body")
    body = body if isinstance(body, dict) else {}
    out = {
        "id": item.get("message_id", ""),
        "from": address(author) if author else "",
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

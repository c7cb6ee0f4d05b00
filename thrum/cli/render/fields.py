"""Reading a message out of an RPC reply, whatever shape the reply gives it.

Replies name the same thing in more than one way (the author as a dict or a
name, the body as a dict or a string, a reply's parent as a field or a ref, the
readers as a dict or a list): these functions are the one place that knows the
shapes, so the views never have to.
"""

from __future__ import annotations

from typing import Any


def author_of(msg: dict[str, Any]) -> str:
    author = msg.get("author")
    if isinstance(author, dict):
        return author.get("name") or author.get("agent_id") or "?"
    return msg.get("author_name") or msg.get("agent_id") or msg.get("author_id") or "?"


def body_of(msg: dict[str, Any]) -> dict[str, Any]:
    body = msg.get("body")
    if isinstance(body, dict):
        return body
    return {"format": "markdown", "content": "" if body is None else str(body), "structured": ""}


def reply_to_of(msg: dict[str, Any]) -> str | None:
    parent = msg.get("reply_to")
    if isinstance(parent, str) and parent:
        return parent
    for ref in msg.get("refs") or ():
        if isinstance(ref, dict) and ref.get("type") == "reply_to" and ref.get("value"):
            return str(ref["value"])
    return None


def is_edited(msg: dict[str, Any]) -> bool:
    if msg.get("edited") is True:
        return True
    if isinstance(msg.get("version"), int) and msg["version"] > 1:
        return True
    updated, created = msg.get("updated_at"), msg.get("created_at")
    return bool(updated) and updated != created


def mentions_of(msg: dict[str, Any]) -> list[str]:
    out = []
    for ref in msg.get("refs") or ():
        if isinstance(ref, dict) and ref.get("type") == "mention" and ref.get("value"):
            out.append(ref["value"])
    if not out:
        for r in msg.get("recipients") or msg.get("to") or ():
            value = r.get("address") if isinstance(r, dict) else r
            if value:
                out.append(str(value).lstrip("@"))
    return out


def read_by_names(read_by: Any) -> list[str]:
    if isinstance(read_by, dict):
        return sorted(read_by)
    names = []
    for item in read_by or ():
        if isinstance(item, dict):
            names.append(item.get("agent_id") or item.get("name") or "?")
        else:
            names.append(str(item))
    return names

"""The replies the CLI tests' fake daemon gives: one place, held to the real daemon's replies.

tests/cli/test_cli_contract.py makes the same calls against a real daemon and
checks that every field a reply here has, the real reply has too, with the same
JSON type. So render code is tested against shapes the daemon really sends, not
against guesses. Tests may build variations, but from these.
"""

from __future__ import annotations

from typing import Any

TS = "2026-02-03T15:00:00.000Z"


def m(mid: str, author: str = "bob", read: bool = False, **kw: Any) -> dict:
    """One item of a message.list / message.sent page."""
    return {
        "message_id": mid,
        "agent_id": author,
        "created_at": TS,
        "updated_at": "",
        "body": {"format": "markdown", "content": f"body of {mid}", "structured": ""},
        "deleted": False,
        "is_read": read,
        **kw,
    }


def inbox_result(*messages: dict, total: int | None = None, unread: int | None = None) -> dict:
    """A message.list page."""
    return {
        "messages": list(messages),
        "total": len(messages) if total is None else total,
        "unread": sum(not msg.get("is_read") for msg in messages) if unread is None else unread,
        "page": 1,
        "page_size": 10,
        "total_pages": 1,
    }


def agent_registered(params: dict) -> dict:
    """agent.register: the agent as registered (the fake echoes the params)."""
    return {"agent": params, "created": True, "updated": False}


def marked(params: dict) -> dict:
    """message.markRead."""
    return {"marked_count": len(params.get("message_ids") or [])}


def cleanup(params: dict) -> dict:
    """agent.cleanup: one stale agent, removed with force."""
    return {"candidates": ["old"], "removed": ["old"] if params.get("force") else []}


SENT = {"message_id": "msg_01NEW", "thread_id": "", "created_at": TS, "session_id": "ses_1", "recipients": []}
SENT_TO_ROLE = {**SENT, "recipients": [{"address": "@reviewer", "kind": "role"}]}
MESSAGE = {
    "message": {
        "message_id": "msg_A",
        "author": {"agent_id": "bob", "session_id": "ses_1"},
        "body": {"format": "markdown", "content": "body of msg_A", "structured": ""},
        "created_at": TS,
        "updated_at": "",
        "deleted": False,
        "is_read": False,
        "scopes": [],
        "refs": [],
        "metadata": {"deleted_at": "", "delete_reason": ""},
    }
}
EDITED = {"message_id": "msg_A", "version": 2, "updated_at": TS}
DELETED = {"message_id": "msg_A", "deleted": True, "deleted_at": TS}
SENT_PAGE = inbox_result({**m("msg_A", author="alice", read=True), "read_by": ["bob"]})
SESSION_STARTED = {"session_id": "ses_1", "agent_id": "alice", "started_at": TS}
SESSION_ENDED = {"session_id": "ses_1", "agent_id": "alice", "ended_at": TS, "reason": "normal"}
NO_SESSIONS: dict = {"sessions": []}
NO_AGENTS: dict = {"agents": []}
GROUPS = {"groups": [{"name": "everyone", "description": "", "member_count": 2, "builtin": True}]}
MEMBERS = {"members": [{"type": "role", "value": "implementer"}]}
MEMBERS_EXPANDED = {"agents": ["alice"]}
DONE: dict = {}  # group.create / delete / member.add / member.remove: the CLI prints from its own input

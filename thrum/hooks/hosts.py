"""What each host sends a hook and expects back: the contracts `thrum hook HOST EVENT` speaks.

Pure data and functions (no I/O), so the entry point stays small and the tests can
check every contract without a host. Sources, host by host: docs/design/hooks.md.

Every event has a *role*:

- ``start``: a session begins. Put what is waiting into the agent's context (and
  remember the terminal pane, for idle wake-ups);
- ``context``: a turn boundary where text can be added to the context (a prompt
  was submitted, a tool ran);
- ``stop``: the agent is about to end its turn. Block the stop (make the agent go
  on) only for messages that must not wait, and never when the host says this
  stop already follows a block (``stop_hook_active``; Cursor: ``loop_count`` > 0);
- ``notify``: the host only tells (Codex's legacy ``notify`` program); nothing to print.

`output` turns (host, role, event, text) into the bytes the host reads on stdout.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # not typing's: this module is on every hook's start-up path
if TYPE_CHECKING:
    from typing import Any

# host -> event -> role. Event names are the hosts' own spelling.
EVENTS: dict[str, dict[str, str]] = {
    "claude": {
        "SessionStart": "start",
        "UserPromptSubmit": "context",
        "PostToolUse": "context",
        "Stop": "stop",
    },
    "codex": {
        "SessionStart": "start",
        "UserPromptSubmit": "context",
        "PostToolUse": "context",
        "Stop": "stop",
        "notify": "notify",
    },
    "gemini": {
        "SessionStart": "start",
        "BeforeAgent": "context",
        "AfterTool": "context",
        "AfterAgent": "stop",
    },
    "cursor": {
        "sessionStart": "start",
        "postToolUse": "context",
        "stop": "stop",
    },
    "generic": {
        "start": "start",
        "prompt": "context",
        "stop": "stop",
    },
}
HOSTS = tuple(EVENTS)


def role(host: str, event: str) -> str | None:
    """The role of ``event`` for ``host`` (None: not an event thrum answers)."""
    return EVENTS.get(host, {}).get(event)


def cwd_of(host: str, payload: dict[str, Any]) -> str | None:
    """Where the agent works, as the host reports it (Cursor: its first workspace root)."""
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and cwd:
        return cwd
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str):
        return roots[0]
    return None


def follows_a_block(host: str, payload: dict[str, Any]) -> bool:
    """This stop comes right after a stop thrum (or another hook) blocked: let it through."""
    if payload.get("stop_hook_active") is True:
        return True
    count = payload.get("loop_count")  # Cursor's stop hook counts the follow-ups instead
    return isinstance(count, int) and not isinstance(count, bool) and count > 0


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def output(host: str, role_: str, event: str, text: str) -> bytes:
    """What to print for ``text`` (the framed messages) at ``event``; b"" prints nothing.

    - Claude Code and Codex: ``hookSpecificOutput.additionalContext`` (with
      ``hookEventName``) for SessionStart, UserPromptSubmit and PostToolUse;
      ``{"decision": "block", "reason": text}`` at Stop.
    - Gemini CLI: ``hookSpecificOutput.additionalContext`` for SessionStart,
      BeforeAgent and AfterTool; ``{"decision": "deny", "reason": text}`` at
      AfterAgent (the reason becomes the agent's next prompt).
    - Cursor: ``{"additional_context": text}`` for sessionStart and postToolUse;
      ``{"followup_message": text}`` at stop.
    - generic: the text itself.
    """
    if not text or role_ == "notify":
        return b""
    if host == "generic":
        return text.encode("utf-8") + b"\n"
    if host == "cursor":
        return _dumps({"followup_message": text} if role_ == "stop" else {"additional_context": text})
    if role_ == "stop":
        return _dumps({"decision": "deny" if host == "gemini" else "block", "reason": text})
    return _dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


def via(host: str, event: str) -> str:
    """How a surfacing is recorded (``message.surfaced``'s ``via``)."""
    return f"hook {host} {event}"[:80]

"""Who is around: the one definition of active / idle / offline (issue 30, item 5).

Pure (no I/O, no trio): the daemon, and only the daemon, applies it when it answers
``agent.list`` / ``agent.get``; the CLI, MCP and the Web UI show the ``status`` it
gives and never derive their own (docs/design/presence.md).

Rules:

1. An agent's *last seen* is the time of its newest event in the log that shows it
   acting (`counts_as_presence`): a message it sent, a thread, a group change, a
   work context, a team fact it signed, or a heartbeat
   (`thrum.daemon.presence`). Every replica that holds the same events computes the
   same value (`thrum.store.directory_fold.last_seen`).
2. What does not count: what can be written for an agent that is not there, and
   endings. A registration (quickstart, a script, a teammate's set-up: the spec's
   "registered, never seen" is offline) and a session's start (begun for whoever a
   call names, the Web UI's "Mark read" for an agent included); read, unread and
   archive marks (the Web UI presses them for agents, and watching must never count
   as the agent being there: issue 27, docs/design/ui.md); delivered receipts
   (written by the daemon holding the key when mail arrives, whether or not any agent
   process runs: docs/design/delivery.md); surfaced and acked marks (written by hooks
   and tools that call as the agent, which its daemon sees anyway); a session's end
   (the agent left; a crashed session is ended by the next daemon start, maybe days
   later); an edit or a delete (it may name a message that is not its writer's, which
   the fold ignores: such a line must change nothing, `tests/store/
   test_projection_properties.py`). An agent that only reads, or edits, is present
   through the heartbeats its daemon writes when it sees it.
3. ``active``: last seen less than `ACTIVE_S` ago (spec/mcp-server.md's 2 minutes);
   ``idle``: less than `IDLE_S` ago; ``offline``: longer ago, or never. A last seen
   in the future (a clock ahead, by at most the replica's ``clock_skew``: later
   events wait) counts as now.
"""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["ACTIVE_S", "IDLE_S", "NOT_PRESENCE", "STATUSES", "counts_as_presence", "status"]

ACTIVE_S = 120.0
IDLE_S = 900.0
STATUSES = ("active", "idle", "offline")
NOT_PRESENCE = frozenset(
    {
        "agent.register",
        "agent.session.start",
        "message.edit",
        "message.delete",
        "message.read",
        "message.unread",
        "message.archive",
        "message.delivered",
        "message.surfaced",
        "message.acked",
        "agent.session.end",
    }
)


def counts_as_presence(event_type: str) -> bool:
    """Whether an event of this type shows its author acting (rules 1 and 2)."""
    return event_type not in NOT_PRESENCE


def _parse(text: str) -> datetime | None:
    try:
        seen = datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None
    if seen is not None and seen.tzinfo is None:
        seen = seen.replace(tzinfo=timezone.utc)
    return seen


def status(last_seen_at: str | None, now: datetime | None = None) -> str:
    """``active``, ``idle`` or ``offline`` for an RFC 3339 last seen (rule 3)."""
    seen = _parse(last_seen_at or "")
    if seen is None:
        return "offline"
    age = ((now or datetime.now(timezone.utc)) - seen).total_seconds()
    if age < ACTIVE_S:
        return "active"
    return "idle" if age < IDLE_S else "offline"

"""One subscription and its filter: which events it hears of, and what each notification holds.

The filters (spec/events.md; the hub's rule 2): ``scope`` (exact scope match),
``mention`` (the message has a mention ref naming one of the subscription's targets),
``all``. Message events (create/edit/delete, thread.updated) are filtered; agent,
session, receipt and group events reach ``all`` subscriptions only. A mention
subscription made by an agent never delivers that agent's own messages.

Pure: the hub (`thrum.daemon.hub`) keeps the subscriptions, resolves their targets and
sends; this module only decides.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import events as ev

if TYPE_CHECKING:
    from .connection import Connection

Event = dict[str, Any]
Info = dict[str, Any]  # scopes, refs, thread and author of the message an event is about

NOTIFY_TYPES = (
    frozenset(
        {
            "message.create",
            "message.edit",
            "message.delete",
            "agent.register",
            "agent.cleanup",
            "agent.update",
            "agent.session.start",
            "agent.session.end",
            # `all` only (and every receipt: read marks, delivery states): a watcher (the Web UI) keeps groups live
            "group.create",
            "group.delete",
            "group.member.add",
            "group.member.remove",
        }
    )
    | ev.RECEIPT_TYPES
)  # unread counts and each recipient's delivery state
MESSAGE_TYPES = frozenset({"message.create", "message.edit", "message.delete"})
TARGET_CHANGERS = frozenset(
    {"agent.register", "agent.cleanup", "group.create", "group.delete", "group.member.add", "group.member.remove"}
)
# what can make a message newly match someone's `message.wait` (reads and archives only remove)
INBOX_CHANGERS = frozenset({"message.create", "message.unread"}) | TARGET_CHANGERS


@dataclass(eq=False)
class Subscription:
    """A subscription and its replay's state (the hub's own record)."""

    id: int
    conn: Connection
    filter_type: str
    scope: dict[str, str] | None = None
    mention: str | None = None
    session_id: str | None = None
    agent: str | None = None
    created_at: str = ""
    targets: frozenset[str] | None = None  # names whose mention counts as mentioning `mention`
    held: deque[tuple[Event, Info | None]] | None = None  # live events held back while a replay runs
    rescan_above: str | None = None  # while set, live events after this event_id come from the log instead
    replayed: set[str] = field(default_factory=set)  # event_ids of the replay's current piece
    replayed_count: int = 0

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "subscription_id": self.id,
            "filter_type": self.filter_type,
            "created_at": self.created_at,
            "session_id": self.session_id or "",
        }
        if self.scope:
            d["scope"] = self.scope
        if self.mention:
            d["mention"] = self.mention
        return d


def matches(sub: Subscription, d: Event, info: Info | None) -> bool:
    """Whether ``d`` (about a message with ``info``, when it is about one) reaches ``sub``."""
    if sub.filter_type == "all":
        return True
    if info is None or (d["type"] not in MESSAGE_TYPES and d["type"] != "thread.updated"):
        return False
    if sub.filter_type == "scope" and sub.scope is not None:
        want_t, want_v = sub.scope["type"], sub.scope["value"]
        return any(s["type"] == want_t and s["value"] == want_v for s in info["scopes"])
    if sub.filter_type == "mention":
        if sub.agent and info.get("agent_id") == sub.agent:
            return False  # one's own message is never news to oneself (it mentions "everyone" too)
        targets = sub.targets or (sub.mention, "everyone")
        return any(r["type"] == "mention" and r["value"] in targets for r in info["refs"])
    return False


def payload(d: Event, sub: Subscription, *, replay: bool = False) -> Event:
    """A notification's params for one subscription."""
    out = dict(d)
    out["subscription_id"] = sub.id
    if replay:
        out["replay"] = True
    return out


def info_of(d: Event) -> Info:
    """The routing of a ``message.create``: what the filters look at."""
    return {
        "scopes": d.get("scopes") or [],
        "refs": d.get("refs") or [],
        "thread_id": d.get("thread_id", ""),
        "agent_id": d.get("agent_id", ""),
    }

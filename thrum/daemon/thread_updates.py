"""``thread.updated``: a live summary of a thread, sent when a message joins it.

Not replayed on resume, and not sent to a subscription still replaying (it would
arrive before the events it summarises). It runs after the writer published the
message, in its own task, since each summary is a query.
"""

from __future__ import annotations

import logging

from .. import events as ev
from ..store import queries

log = logging.getLogger(__name__)


def payload_for(d: dict, sub) -> dict:
    """A notification's params for one subscription (the hub's replay flag aside)."""
    out = dict(d)
    out["subscription_id"] = sub.id
    return out


async def send_thread_updates(hub, creates: list[dict], infos: dict) -> None:
    """Tell each connection whose subscriptions match the summary of the thread a new message
    joined, as its subscriber sees it (unread counts are per agent)."""
    try:
        for d in creates:
            info = infos.get(d["message_id"])
            probe = {"type": "thread.updated"}
            # a notification of its own, so its own id: clients de-duplicate by event_id
            # (spec/events.md) and must not drop it as a repeat of the message.create
            update_id = ev.new_ulid()
            done: set[int] = set()
            summaries: dict = {}
            for sub in list(hub.subs.values()):
                if id(sub.conn) in done or sub.held is not None or not hub._matches(sub, probe, info):
                    continue
                done.add(id(sub.conn))
                if sub.agent not in summaries:
                    summaries[sub.agent] = await hub.daemon.writer.read(
                        queries.thread_summary, d["thread_id"], sub.agent
                    )
                summary = summaries[sub.agent]
                if summary is None or sub.id not in hub.subs:
                    continue
                payload = {
                    "type": "thread.updated",
                    "timestamp": d["timestamp"],
                    "event_id": update_id,
                    "v": 1,
                    "cause_event_id": d["event_id"],
                    **summary,
                }
                sub.conn.notify("thread.updated", payload_for(payload, sub))
    except Exception:
        log.exception("thread.updated notifications failed")

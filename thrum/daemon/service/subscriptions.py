"""subscribe.* and message.wait: push delivery and long-polling, no polling loops.

``subscribe.create`` answers at once with the subscription; with
``since_event_id`` the missed events follow as notifications flagged
``replay: true``, then one ``subscription.replayed`` notification, then live
events. ``message.wait`` queries the inbox, and if nothing matches sleeps on the
hub's `inbox_changed` event (replaced on every write that could add a message)
until the deadline.
"""

from __future__ import annotations

from typing import Any, TYPE_CHECKING

import trio

from ... import errors
from ... import events as ev
from ...store import prefixes, queries
from ..dispatch import Call, method

if TYPE_CHECKING:
    from ..hub import Hub

FILTER_TYPES = ("scope", "mention", "all")
MAX_WAIT = 600.0


def _hub(call: Call) -> Hub:
    if call.ctx.hub.closed:
        raise errors.Unavailable("subscriptions are not available (daemon shutting down)")
    return call.ctx.hub


@method("subscribe.create")
async def create(call: Call) -> dict[str, Any]:
    p = call.params
    filter_type = p.str("filter_type", required=True, choices=FILTER_TYPES)
    scope = mention = None
    if filter_type == "scope":
        scope = p.tag("scope")
        if scope is None:
            raise errors.ValidationError("invalid params: scope is required for filter_type scope", field="scope")
    elif filter_type == "mention":
        mention = p.str("mention") or p.str("mention_role")
        mention = (mention or "").strip().lstrip("@")
        if not mention:
            raise errors.ValidationError("invalid params: mention is required for filter_type mention", field="mention")
        if not ev.NAME_RE.fullmatch(mention):
            raise errors.ValidationError(
                f"invalid params: mention {mention[:60]!r} is not an agent, role or group name", field="mention"
            )
    since = p.str("since_event_id") or None
    caller = await call.ctx.agents.caller(p) if "caller" in p else None
    session_id = None
    if caller:
        session_id = await call.ctx.sessions.ensure(caller, p.str("session_id"))
    sub = await _hub(call).subscribe(
        call.conn,
        filter_type=filter_type,
        scope=scope,
        mention=mention,
        session_id=session_id,
        agent=caller,
        since_event_id=since,
    )
    out = sub.describe()
    if since:
        out["since_event_id"] = since
    return out


@method("subscribe.list")
async def list_subscriptions(call: Call) -> dict[str, Any]:
    return {"subscriptions": _hub(call).list_for(call.conn)}


@method("subscribe.delete")
async def delete(call: Call) -> dict[str, Any]:
    sub_id = call.params.int("subscription_id", required=True)
    if not _hub(call).unsubscribe(call.conn, sub_id):
        raise errors.NotFound(f"subscription {sub_id} not found on this connection")
    return {"subscription_id": sub_id, "deleted": True}


@method("message.wait")
async def wait(call: Call) -> dict[str, Any]:
    """Block until an unread message for the caller (matching the filters) exists, or time out.

    ``after`` (a message id) only counts messages created after that one.
    """
    p = call.params
    caller = await call.ctx.agents.caller(p)
    timeout = p.number("timeout", default=30.0, minimum=0, maximum=MAX_WAIT)
    after = p.str("after")
    if after and not ev.MESSAGE_ID_RE.fullmatch(after):
        raise errors.ValidationError(f"invalid params: after {after[:60]!r} is not a message id", field="after")
    if after:  # a unique prefix works, like everywhere a message id is taken
        after = await call.ctx.store.read(prefixes.complete_id, "message", after, field="after")
    query = dict(
        viewer=caller,
        exclude_author=caller,
        unread_for=caller,
        mentions_of=caller if p.bool("mentions") else None,
        scope=p.tag("scope"),
        page_size=p.int("limit", default=10, minimum=1, maximum=100),
        sort_order="asc",
    )
    hub = _hub(call)
    deadline = trio.current_time() + timeout
    while True:
        changed = hub.inbox_changed  # taken before querying: nothing published in between is missed
        if after:
            messages = await call.ctx.store.read(queries.unread_after, query, after)
        else:
            messages = (await call.ctx.store.read(queries.list_messages, **query))["messages"]
        if messages:
            return {"messages": messages, "timed_out": False}
        if trio.current_time() >= deadline or hub.closed:
            return {"messages": [], "timed_out": True}
        with trio.move_on_at(deadline):
            await changed.wait()

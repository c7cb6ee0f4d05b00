"""message.pending, message.surface, message.ack, message.waitAcked: delivery states (docs/design/delivery.md).

- ``message.pending``: what a hook should put in the caller's context next (every
  message delivered to it and never surfaced, then overdue acks). Whatever reached
  the caller and is not recorded as delivered yet counts, and is recorded now, so
  a hook that runs right after a message arrived sees it. With ``surface_via`` it
  is a hook's whole exchange: framed text out, surfaced recorded, one write.
- ``message.surface``: the caller's front end placed these messages in its context
  (a ``message.surfaced`` receipt, ``via`` naming the hook or tool).
- ``message.ack``: the caller acknowledges messages addressed to it.
- ``message.waitAcked``: block until every recipient (or, with ``any``, one) acked.

Each receipt is one event per 1,000 ids in the caller's receipts stream, signed
by the caller's key on this machine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from ... import errors, framing
from ... import events as ev
from ...events.values import MAX_VIA_CHARS
from ...store import delivery as delivery_store
from ..dispatch import Call, method
from .message_ids import require_message, require_messages

MAX_PENDING = 100
MAX_WAIT = 600.0


def now_key() -> str:
    return ev.now_rfc3339()


async def _write(call: Call, cls: Callable[..., ev.Event], caller: str, ids: list[str], **extra: Any) -> None:
    session_id = await call.ctx.sessions.ensure(caller, call.params.str("session_id"))
    await call.ctx.store.write(
        [
            cls(agent_id=caller, session_id=session_id, message_ids=tuple(ids[i : i + 1000]), **extra)
            for i in range(0, len(ids), 1000)
        ]
    )


@method("message.pending")
async def pending(call: Call) -> dict[str, Any]:
    """``{messages, total}``: see `thrum.store.delivery.pending`.

    With ``surface_via`` (a hook's one call) the daemon frames what is waiting
    (`thrum.framing`, a fresh boundary) and records the messages shown in full as
    surfaced via it, in the same durable write as the delivered receipts: the answer
    is ``{text, shown, total, urgent}`` instead of the messages. With ``urgent_only``
    (a stop) nothing is framed or recorded unless one of them is urgent.
    """
    p = call.params
    caller = await call.ctx.agents.caller(p)
    limit = p.int("limit", default=20, minimum=1, maximum=MAX_PENDING)
    via = p.str("surface_via", default="", max_len=MAX_VIA_CHARS) or ""
    urgent_only = p.bool("urgent_only")
    session_id = p.str("session_id")
    answer: dict[str, Any] = {}

    async def take(found: dict[str, list[str]]) -> list[ev.Event]:
        arriving = found.get(caller, [])
        got = await call.ctx.store.read(
            delivery_store.pending, caller, limit=limit, now_key=now_key(), arriving=arriving
        )
        if not via:
            answer.update(got)
            return []
        messages, total = got["messages"], int(got["total"])
        urgent = any(m.get("urgent") for m in messages)
        answer.update(text="", shown=[], total=total, urgent=urgent)
        if not messages or (urgent_only and not urgent):
            return []
        text, shown = framing.frame(messages, agent=caller, boundary=framing.new_boundary(), more=total - len(messages))
        answer.update(text=text, shown=shown)
        session = await call.ctx.sessions.ensure(caller, session_id)
        return [
            ev.MessageSurfaced(agent_id=caller, session_id=session, message_ids=tuple(shown[i : i + 1000]), via=via)
            for i in range(0, len(shown), 1000)
        ]

    await call.ctx.delivery.flush(take)
    return answer


@method("message.surface")
async def surface(call: Call) -> dict[str, Any]:
    p = call.params
    caller = await call.ctx.agents.caller(p)
    via = p.str("via", default="", max_len=MAX_VIA_CHARS) or ""
    ids, heads = await require_messages(call, p.str_list("message_ids", required=True, single=False))
    ids = [m for m in ids if heads[m]["agent_id"] != caller]  # one's own messages are never surfaced to one
    if ids:
        await _write(call, ev.MessageSurfaced, caller, ids, via=via)
    return {"surfaced_count": len(ids)}


@method("message.ack")
async def ack(call: Call) -> dict[str, Any]:
    """``{acked_count, acked, already_acked}`` (full ids); a message not addressed to the caller is Forbidden."""
    p = call.params
    caller = await call.ctx.agents.caller(p)
    ids, heads = await require_messages(call, p.str_list("message_ids", required=True, single=False))
    gone = [m for m in ids if heads[m]["deleted"]]
    if gone:
        raise errors.Conflict(f"message {gone[0]} was deleted; there is nothing to acknowledge")
    sorted_ids = await call.ctx.store.read(delivery_store.check_ackable, caller, ids)
    if sorted_ids["ack"]:
        await _write(call, ev.MessageAcked, caller, sorted_ids["ack"])
    return {"acked_count": len(sorted_ids["ack"]), "acked": sorted_ids["ack"], "already_acked": sorted_ids["already"]}


@method("message.waitAcked")
async def wait_acked(call: Call) -> dict[str, Any]:
    """Block until ``message_id`` is acked by every recipient (``any``: by one), or ``timeout`` (s) passes.

    Returns the ack state (`thrum.store.delivery.ack_state`) with ``timed_out``.
    Wakes on every published event (local or synced); nothing polls.
    """
    p = call.params
    mid, _ = await require_message(call)
    timeout = p.number("timeout", default=30.0, minimum=0, maximum=MAX_WAIT)
    want_any = p.bool("any")
    hub = call.ctx.hub
    deadline = trio.current_time() + timeout
    while True:
        changed = hub.changed  # taken before reading: nothing is missed
        state = await call.ctx.store.read(delivery_store.ack_state, mid, now_key())
        if not state["recipients"]:
            raise errors.Conflict(f"message {mid} has no recipients to wait for")
        done = bool(state["acked_by"]) if want_any else not state["waiting_for"]
        if done or trio.current_time() >= deadline or hub.closed:
            return {**state, "timed_out": not done}
        with trio.move_on_at(deadline):
            await changed.wait()

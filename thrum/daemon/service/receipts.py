"""message.markRead, message.markUnread, message.archive: the marks an agent puts on messages.

A mark is a receipt event in the agent's own receipts stream (one event per
1,000 ids), written only for the messages it changes: the counts in the replies
say how many changed. One's own messages are always read to their author; an
archive is final.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import errors
from ... import events as ev
from ...store import queries
from ..dispatch import Call, method
from .message_ids import require_messages


async def _write_receipts(call: Call, cls: Callable[..., ev.Event], caller: str, ids: list[str]) -> None:
    """One receipt event per 1,000 ids (one log line each; a line stays a sane size)."""
    session_id = await call.ctx.sessions.ensure(caller, call.params.str("session_id"))
    await call.ctx.store.write(
        [
            cls(agent_id=caller, session_id=session_id, message_ids=tuple(ids[i : i + 1000]))
            for i in range(0, len(ids), 1000)
        ]
    )


async def _read_flags(call: Call, caller: str, ids: list[str]) -> dict[str, bool]:
    """Whether each message counts as read before a mark: for the caller, or with
    ``mailbox_state`` for the mailbox it acts for (Gas City mail: one mailbox, an agent
    per machine, the latest mark of any of them wins — thrum.store.mailboxes)."""
    if call.params.bool("mailbox_state"):
        states = await call.ctx.store.read(queries.mailbox_states, ids)
        return {m: bool(states.get(m, {}).get("read")) for m in ids}
    return await call.ctx.store.read(queries.read_flags, caller, ids)


@method("message.markRead")
async def mark_read(call: Call) -> dict[str, Any]:
    """``marked_count`` counts the messages this call turned from unread to read."""
    p = call.params
    caller = await call.ctx.agents.caller(p)
    if p.bool("all"):
        ids = await call.ctx.store.read(
            queries.unread_ids, caller, mentions_only=p.bool("mentions"), scope=p.tag("scope")
        )
        own: set[str] = set()
    else:
        ids, heads = await require_messages(call, p.str_list("message_ids", required=True, single=False))
        own = {m for m, h in heads.items() if h["agent_id"] == caller}  # always read to their author
    if not ids:
        return {"marked_count": 0}
    flags = await _read_flags(call, caller, ids)
    todo = [m for m in ids if not flags.get(m) and m not in own]
    if todo:
        await _write_receipts(call, ev.MessageRead, caller, todo)
    result: dict[str, Any] = {"marked_count": len(todo)}
    also = await call.ctx.store.read(queries.also_read_by, ids, caller)
    if also:
        result["also_read_by"] = also
    return result


@method("message.markUnread")
async def mark_unread(call: Call) -> dict[str, Any]:
    """``marked_count`` counts the messages this call turned from read to unread (one's
    own messages stay read: they are never unread to their author).

    An archive is final: an archived message is marked unread like any other but stays
    out of the inbox, so ``archived`` names those among ``message_ids`` (in the order
    given; with ``mailbox_state``, archived in the mailbox) for the caller to say so.
    """
    p = call.params
    caller = await call.ctx.agents.caller(p)
    ids, heads = await require_messages(call, p.str_list("message_ids", required=True, single=False))
    flags = await _read_flags(call, caller, ids)
    todo = [m for m in ids if flags.get(m) and heads[m]["agent_id"] != caller]  # own: never unread
    if todo:
        await _write_receipts(call, ev.MessageUnread, caller, todo)
    archived = await _archived(call, caller, ids)
    return {"marked_count": len(todo), "archived": [m for m in ids if m in archived]}


async def _archived(call: Call, caller: str, ids: list[str]) -> set[str]:
    """The messages among ``ids`` archived by the caller (with ``mailbox_state``: in the mailbox)."""
    if call.params.bool("mailbox_state"):
        states = await call.ctx.store.read(queries.mailbox_states, ids)
        return {m for m in ids if states.get(m, {}).get("archived")}
    return await call.ctx.store.read(queries.archived_ids, caller, ids)


@method("message.archive")
async def archive(call: Call) -> dict[str, Any]:
    p = call.params
    caller = await call.ctx.agents.caller(p)
    ids, _ = await require_messages(call, p.str_list("message_ids", required=True, single=False))
    already = await call.ctx.store.read(queries.archived_ids, caller, ids)
    todo = [m for m in ids if m not in already]
    if not todo:
        raise errors.Conflict(f"already archived: {', '.join(ids[:10])}", data={"already_archived": ids})
    await _write_receipts(call, ev.MessageArchive, caller, todo)
    return {"archived_count": len(todo), "already_archived": sorted(already)}

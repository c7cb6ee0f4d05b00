"""message.* and thread.* reads: list (the inbox), get, sent, thread, thread.list, counts.

Each reads through `thrum.store.queries` in a worker thread (``ctx.store.read``) and
writes nothing. A ``caller`` is optional where the spec allows reading without
one (then nothing is read or unread for anyone); the filters that act for the
caller (``mentions``, ``unread``, ``exclude_own``, ``archived_only``) need one.
"""

from __future__ import annotations

from typing import Any

from ... import errors
from ... import events as ev
from ...store import delivery as delivery_store
from ...store import prefixes, queries
from ..dispatch import Call, method
from .message_ids import complete_thread_id, id_texts, require_message


async def _optional_caller(call: Call) -> str | None:
    return await call.ctx.agents.caller(call.params) if "caller" in call.params else None


@method("message.list")
async def list_messages(call: Call) -> dict[str, Any]:
    p = call.params
    mentions = p.bool("mentions")
    unread = p.bool("unread")
    exclude_own = p.bool("exclude_own")
    # the config-resolved filters act for the caller: without one, the repository's
    # single identity (as in the CLI), else an error naming the param
    caller = (
        await call.ctx.agents.caller(p)
        if (mentions or unread or exclude_own or p.bool("archived_only"))
        else await _optional_caller(call)
    )
    unread_for = p.str("unread_for_agent") or (caller if unread else None)
    return await call.ctx.store.read(
        queries.list_messages,
        viewer=caller or p.str("unread_for_agent"),
        author_id=p.str("author_id"),
        exclude_author=caller if exclude_own else None,
        scope=p.tag("scope"),
        ref=p.tag("ref"),
        mentions_of=caller if mentions else None,
        mention_role=p.str("mention_role"),
        unread_for=unread_for,
        thread_id=await complete_thread_id(call),
        include_deleted=p.bool("include_deleted"),
        include_archived=p.bool("include_archived"),
        archived_only=p.bool("archived_only"),
        page=p.int("page", default=1),
        page_size=p.int("page_size", default=10),
        sort_by=p.str("sort_by", default="created_at"),
        sort_order=p.str("sort_order", default="desc"),
    )


async def _with_mailbox_state(call: Call, messages: list[dict[str, Any]]) -> None:
    """With ``mailbox_state``: each message gets ``mailbox: {read, archived}`` (thrum.store.mailboxes)."""
    if call.params.bool("mailbox_state") and messages:
        states = await call.ctx.store.read(queries.mailbox_states, [m["message_id"] for m in messages])
        for m in messages:
            m["mailbox"] = states.get(m["message_id"], {"read": False, "archived": False})


@method("message.get")
async def get(call: Call) -> dict[str, Any]:
    caller = await _optional_caller(call)
    mid = call.params.str("message_id", required=True)
    mid = (
        await call.ctx.store.read(prefixes.complete_ids, "message", id_texts([mid], "message_id"), field="message_id")
    )[0]
    result = await call.ctx.store.read(queries.get_message, mid, viewer=caller)
    await call.ctx.store.read(delivery_store.with_delivery, [result["message"]], ev.now_rfc3339())
    await _with_mailbox_state(call, [result["message"]])
    return result


@method("message.sent")
async def sent(call: Call) -> dict[str, Any]:
    """The caller's messages, newest first; each with ``read_by``, ``ack`` and ``delivery`` (every
    recipient's state). ``unacked``: only those asking for an ack some recipient has not given."""
    p = call.params
    caller = await call.ctx.agents.caller(p)
    page, page_size = p.int("page", default=1), p.int("page_size", default=10)
    now = ev.now_rfc3339()
    if p.bool("unacked"):
        return await call.ctx.store.read(delivery_store.unacked_sent, caller, now, page=page, page_size=page_size)
    result = await call.ctx.store.read(queries.sent_messages, caller, page=page, page_size=page_size)
    await call.ctx.store.read(delivery_store.with_delivery, result["messages"], now)
    return result


@method("thread.get")  # the spec's name (spec/events.md, thread.create)
@method("message.thread")
async def thread(call: Call) -> dict[str, Any]:
    p = call.params
    caller = await _optional_caller(call)
    given = p.str("thread_id")
    key: str | None
    if given and given.startswith("msg_"):  # "a thread id or any message id in it" (gc-mail, `thread show`)
        key, _ = await require_message(call, "thread_id")
    elif given:
        key = await complete_thread_id(call)
    elif p.str("message_id"):
        key, _ = await require_message(call)
    else:
        raise errors.ValidationError("invalid params: thread_id or message_id is required", field="thread_id")
    messages = await call.ctx.store.read(queries.thread_messages, key, viewer=caller)
    await _with_mailbox_state(call, messages)
    if p.bool("delivery"):  # each recipient's state, as message.get gives it (the Web UI's thread pane)
        await call.ctx.store.read(delivery_store.with_delivery, messages, ev.now_rfc3339())
    return {"thread_id": messages[0]["thread_id"] if messages else key, "messages": messages}


@method("thread.list")
async def thread_list(call: Call) -> dict[str, Any]:
    """The caller's threads (with a message of theirs or one in their inbox), newest activity first."""
    p = call.params
    caller = await call.ctx.agents.caller(p)
    return await call.ctx.store.read(
        queries.thread_list,
        caller,
        page=p.int("page", default=1, minimum=1),
        page_size=p.int("page_size", default=10, minimum=1, maximum=queries.MAX_PAGE_SIZE),
    )


@method("message.counts")
async def counts(call: Call) -> dict[str, Any]:
    caller = await call.ctx.agents.caller(call.params)
    return await call.ctx.store.read(queries.counts, caller, mentions_only=call.params.bool("mentions"))

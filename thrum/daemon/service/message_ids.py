"""Message and thread ids as callers give them, checked and completed (every message.* method starts here).

A caller may give a full id or a unique prefix of one, with or without its
``msg_`` / ``thr_`` head. `require_messages` completes the prefixes (an
ambiguous one is an error naming the candidates), drops duplicates and returns
the head facts of each message (author, deleted, thread) that the write
methods check; an unknown full thread id starts that thread (`complete_thread_id`).
"""

from __future__ import annotations

import re
from typing import Any

from ... import errors
from ... import events as ev
from ...store import prefixes, queries
from ..dispatch import Call

# what an id (or a unique prefix of one, with or without its ``msg_`` head) may look like
_ID_TEXT = re.compile(r"[0-9A-Za-z_\-]{1,84}")


def id_texts(values: list[str], field: str) -> list[str]:
    for v in values:
        if not _ID_TEXT.fullmatch(v):
            raise errors.ValidationError(f"invalid params: {v[:80]!r} is not a message id", field=field)
    return values


async def require_messages(call: Call, ids: list[str], field: str = "message_ids") -> tuple[list[str], dict[str, Any]]:
    """Full ids (unique prefixes completed, duplicates dropped) and their heads.

    Raises:
        NotFound: an id names no message; ValidationError: a prefix is ambiguous.
    """
    full = list(
        dict.fromkeys(await call.ctx.store.read(prefixes.complete_ids, "message", id_texts(ids, field), field=field))
    )
    return full, await call.ctx.store.read(queries.message_heads, full)


async def require_message(call: Call, key: str = "message_id") -> tuple[str, dict[str, Any]]:
    mid = call.params.str(key, required=True)
    full, heads = await require_messages(call, [mid], key)
    return full[0], heads[full[0]]


async def complete_thread_id(call: Call) -> str | None:
    """``thread_id`` completed from a unique prefix; an unknown full thread id starts that thread."""
    thread_id = call.params.str("thread_id")
    if not thread_id:
        return None
    if not _ID_TEXT.fullmatch(thread_id):
        raise errors.ValidationError(
            f"invalid params: thread_id {thread_id[:60]!r} is not a thread id", field="thread_id"
        )
    try:
        return await call.ctx.store.read(prefixes.complete_id, "thread", thread_id, field="thread_id")
    except errors.NotFound:
        if ev.THREAD_ID_RE.fullmatch(thread_id):
            return thread_id
        raise

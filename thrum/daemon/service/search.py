"""message.search: the caller's messages found by a query (`thrum.search_query`), ranked, with snippets.

The query string is parsed here (a bad one is -32602 naming ``query``, one line);
``in:`` ids are completed like every other id; the store answers over the same
set ``message.list`` covers for the caller (`thrum.store.search`). A caller is
optional, as for message.list, unless the query speaks of one (``is:unread``,
``is:archived``, ``from:me``, ``to:me``, or ``archived: true``).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any

from ... import events as ev
from ... import search_query
from ...store import prefixes, queries, search
from ..dispatch import Call, method
from .message_ids import id_texts


async def _threads(call: Call, values: tuple[str, ...]) -> tuple[str, ...]:
    """``in:`` values as full thread ids: a thread id (or a unique prefix), or a message id (its thread)."""
    out = []
    for value in values:
        if value.startswith("msg_"):
            mid = (
                await call.ctx.store.read(prefixes.complete_ids, "message", id_texts([value], "query"), field="query")
            )[0]
            out.append((await call.ctx.store.read(queries.message_heads, [mid]))[mid]["thread_id"] or "")
        else:
            out.append(
                await call.ctx.store.read(prefixes.complete_id, "thread", id_texts([value], "query")[0], field="query")
            )
    return tuple(t for t in dict.fromkeys(out) if t) or ("",)


@method("message.search")
async def search_messages(call: Call) -> dict[str, Any]:
    p = call.params
    text = p.str("query", required=True)  # (the parser bounds its length)
    now = ev.now_rfc3339()
    query = search_query.parse(text, now=datetime.now(timezone.utc))
    if p.bool("archived"):
        query = dataclasses.replace(query, archived=True)
    if query.needs_caller or "caller" in p:
        caller: str | None = await call.ctx.agents.caller(p)
    else:
        caller = None
    if caller is not None:
        query = query.for_caller(caller)
    if query.threads:
        query = dataclasses.replace(query, threads=await _threads(call, query.threads))
    return await call.ctx.store.read(
        search.search_messages,
        query,
        viewer=caller,
        now=now,
        page=p.int("page", default=1),
        page_size=p.int("page_size", default=search.DEFAULT_PAGE_SIZE),
    )

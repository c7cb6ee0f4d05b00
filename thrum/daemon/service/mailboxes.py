"""mailbox.list: a shared mailbox's messages with the mailbox's read and archive state.

A mailbox (thrum.store.mailboxes) is a name mail mentions, kept by the agent of
that name and by every agent registered with that module: Gas City's mail, where
each machine has its own agent for an address and all of them share its state.
"""

from __future__ import annotations

from typing import Any

from ...store import queries
from ..dispatch import Call, method


@method("mailbox.list")
async def mailbox_list(call: Call) -> dict[str, Any]:
    p = call.params
    mailbox = p.str("mailbox", required=True, allow_empty=False, max_len=256)
    order = p.str("sort_order", default="asc", choices=("asc", "desc"))
    return await call.ctx.store.read(
        queries.mailbox_list,
        mailbox,
        unread_only=p.bool("unread"),
        page=p.int("page", default=1, minimum=1),
        page_size=p.int("page_size", default=100, minimum=1, maximum=queries.MAILBOX_MAX_PAGE),
        newest_first=order == "desc",
    )

"""``thrum inbox``: message.list (excluding my own messages), rendered, then
the displayed messages are marked read (best effort; not with ``--unread`` or
``--archived``). ``--count`` prints only the totals."""

from __future__ import annotations

import shutil
from typing import Any

import click

from .common import CONTEXT_SETTINGS, Runtime, global_options, parse_tag, runtime
from .render.messages import DEFAULT_WIDTH, next_page_command, render_inbox
from .render.text import plural


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--scope", metavar="TYPE:VALUE", help="Only messages with this scope, e.g. module:auth.")
@click.option("--mentions", is_flag=True, help="Only messages that mention me (my name, role or groups).")
@click.option("--unread", is_flag=True, help="Only unread messages; does not mark them read.")
@click.option("--archived", is_flag=True, help="Only the messages you archived; does not mark them read.")
@click.option("--count", is_flag=True, help="Print only how many messages there are, and how many unread.")
@click.option("--page-size", type=click.IntRange(1, 100), default=10, show_default=True, help="Messages per page.")
@click.option("--page", type=click.IntRange(1, None), default=1, show_default=True, help="Page number.")
@click.option(
    "--for-agent",
    is_flag=True,
    help="Print the messages framed as untrusted data from other agents (for an agent to read), "
    "oldest first, and record them as surfaced to you.",
)
@global_options()
def inbox(
    scope: str | None,
    mentions: bool,
    unread: bool,
    archived: bool,
    count: bool,
    page_size: int,
    page: int,
    for_agent: bool,
) -> None:
    """List messages with read (○) and unread (●) markers, newest first.

    Shows every message except your own and those you archived; replies are
    grouped under the message they answer (↳). Displayed messages are marked
    read, except with --unread or --archived.

    \b
    Examples:
      thrum inbox
      thrum inbox --mentions --unread
      thrum inbox --scope module:auth --page 2
      thrum inbox --count
      thrum inbox --archived
      thrum inbox --unread --for-agent      # what an agent's harness should show it
    """
    rt = runtime()
    params = {"exclude_own": True, "page_size": page_size, "page": page, "sort_by": "created_at", "sort_order": "desc"}
    filters: list[tuple[str, str | None]] = []
    if scope:
        params["scope"] = parse_tag("--scope", scope)
        filters.append(("scope", scope))
    if mentions:
        params["mentions"] = True
        filters.append(("mentions", None))
    if unread:
        params["unread"] = True
        filters.append(("unread", None))
    if archived:
        params["archived_only"] = True
        filters.append(("archived", None))
    if count:
        _print_count(rt, params, mentions)
        return
    result = rt.agent_call("message.list", params)
    messages = result.get("messages") or []

    unfiltered_total = None
    if not messages and filters and not rt.opts.json:
        everything = rt.agent_call("message.list", {"exclude_own": True, "page_size": 1, "page": 1})
        unfiltered_total = everything.get("total")

    width = shutil.get_terminal_size((DEFAULT_WIDTH + 2, 24)).columns - 2
    if for_agent and not rt.opts.json:
        _for_agent(rt, result, messages, page, page_size)
    else:
        rt.emit(result, lambda: render_inbox(result, width=width, filters=filters, unfiltered_total=unfiltered_total))
    if not rt.opts.json and messages and (result.get("total_pages") or 1) > page:
        rt.hint(
            "Next page: " + next_page_command(filters, page=page + 1, page_size=page_size, context=rt.context_flags())
        )

    if not unread and not archived:
        to_mark = [
            m["message_id"] for m in messages if isinstance(m, dict) and m.get("message_id") and not m.get("is_read")
        ]
        if to_mark:
            rt.best_effort("message.markRead", {"message_ids": to_mark})


def _print_count(rt: Runtime, params: dict[str, Any], mentions: bool) -> None:
    """``{"total", "unread"}`` of the inbox these flags select (message.counts when it can answer)."""
    if set(params) <= {"exclude_own", "page_size", "page", "sort_by", "sort_order", "mentions"}:
        result = rt.agent_call("message.counts", {"mentions": True} if mentions else {})
    else:
        listed = rt.agent_call("message.list", {**params, "page_size": 1, "page": 1})
        result = {"total": listed.get("total") or 0, "unread": listed.get("unread") or 0}
    total, unread = int(result.get("total") or 0), int(result.get("unread") or 0)
    rt.emit({"total": total, "unread": unread}, f"{plural(total, 'message')}, {unread} unread")


def _for_agent(rt: Runtime, result: dict[str, Any], messages: list[Any], page: int, page_size: int) -> None:
    """The page framed for an agent (thrum.framing), oldest first; records what it showed in full as surfaced."""
    from .. import framing

    mine = [m for m in reversed(messages) if isinstance(m, dict)]
    beyond = max(0, int(result.get("total") or 0) - (page - 1) * page_size - len(mine))
    text, shown = framing.frame(mine, agent=rt.caller, boundary=framing.new_boundary(), more=beyond)
    rt.echo(text or "No messages.")
    if shown:
        rt.best_effort("message.surface", {"message_ids": shown, "via": "thrum inbox --for-agent"})

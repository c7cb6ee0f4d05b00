"""``thrum thread show|list``: conversations (a message and every reply in its thread)."""

from __future__ import annotations

import shutil

import click

from ..errors import IdentityError
from .common import CONTEXT_SETTINGS, global_options, runtime
from .render.messages import DEFAULT_WIDTH, next_page_command, render_thread, render_threads


@click.group(context_settings=CONTEXT_SETTINGS)
@global_options()
def thread() -> None:
    """Conversations: show one thread, list yours."""


def _width() -> int:
    return shutil.get_terminal_size((DEFAULT_WIDTH + 2, 24)).columns - 2


@thread.command("show", context_settings=CONTEXT_SETTINGS)
@click.argument("thread_or_msg_id", metavar="ID")
@click.option("--peek", is_flag=True, help="Do not mark the shown messages read.")
@global_options()
def show(thread_or_msg_id: str, peek: bool) -> None:
    """Show a thread, oldest message first.

    ID is a thread id (thr_…) or the id of any message in the thread. The shown
    messages are marked read, except with --peek.
    """
    rt = runtime()
    try:
        rt.identity()
        as_agent = True
    except IdentityError as exc:  # reading needs no identity; only read marks do
        rt.debug(f"showing the thread without read marks: {exc.message}")
        as_agent = False
    params = {"thread_id": thread_or_msg_id}
    result = rt.agent_call("message.thread", params) if as_agent else rt.call("message.thread", params)
    messages = [m for m in result.get("messages") or [] if isinstance(m, dict)]
    if not messages:
        raise click.ClickException(f"no thread or message {thread_or_msg_id}")
    rt.emit(result, lambda: render_thread(result, width=_width()))
    if as_agent and not peek:
        me = rt.caller
        to_mark = [
            m["message_id"]
            for m in messages
            if m.get("message_id") and not m.get("is_read") and m.get("agent_id") != me
        ]
        if to_mark:
            rt.best_effort("message.markRead", {"message_ids": to_mark})


@thread.command("list", context_settings=CONTEXT_SETTINGS)
@click.option("--page-size", type=click.IntRange(1, 100), default=10, show_default=True, help="Threads per page.")
@click.option("--page", type=click.IntRange(1, None), default=1, show_default=True, help="Page number.")
@global_options()
def list_threads(page_size: int, page: int) -> None:
    """List your threads, newest activity first, with message and unread counts.

    Your threads are those with a message of yours or one in your inbox
    (archived messages left out).
    """
    rt = runtime()
    result = rt.agent_call("thread.list", {"page": page, "page_size": page_size})
    rt.emit(result, lambda: render_threads(result))
    if not rt.opts.json and (result.get("total_pages") or 1) > page:
        rt.hint(
            "Next page: "
            + next_page_command(
                [], page=page + 1, page_size=page_size, context=rt.context_flags(), command="thread list"
            )
        )

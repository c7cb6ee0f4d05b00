"""``thrum message get|edit|delete|read|unread|archive`` and ``thrum sent``."""

from __future__ import annotations

import shutil

import click

from ..errors import IdentityError, ThrumError
from .common import CONTEXT_SETTINGS, global_options, read_body, runtime
from .render.messages import DEFAULT_WIDTH, archived_note, render_message, render_sent
from .render.text import plural


@click.group(context_settings=CONTEXT_SETTINGS)
@global_options()
def message() -> None:
    """Work with single messages: get, edit, delete, mark read or unread, archive."""


@message.command("get", context_settings=CONTEXT_SETTINGS)
@click.argument("msg_id", metavar="MSG_ID")
@click.option("--peek", is_flag=True, help="Show the message without marking it read.")
@global_options()
def get(msg_id: str, peek: bool) -> None:
    """Show one message with all its details (and mark it read, unless --peek).

    MSG_ID may be a unique prefix (msg_01M8AKM2), like git's short hashes.
    """
    rt = runtime()
    try:
        rt.identity()
        as_agent = True
    except IdentityError as exc:  # reading needs no identity; only marking it read does
        rt.debug(f"showing {msg_id} without marking it read: {exc.message}")
        as_agent = False
    if as_agent:
        result = rt.agent_call("message.get", {"message_id": msg_id})
    else:
        result = rt.call("message.get", {"message_id": msg_id})
    msg = result.get("message") if isinstance(result.get("message"), dict) else result
    rt.emit(result, lambda: render_message(msg))
    if as_agent and not peek and not msg.get("is_read") and not msg.get("deleted"):
        rt.best_effort("message.markRead", {"message_ids": [msg.get("message_id") or msg_id]})


@message.command("edit", context_settings=CONTEXT_SETTINGS)
@click.argument("msg_id", metavar="MSG_ID")
@click.argument("text", required=False, metavar="TEXT")
@click.option("--body-file", metavar="PATH", help="Read the new text from a file (- for stdin).")
@global_options()
def edit(msg_id: str, text: str | None, body_file: str | None) -> None:
    """Replace the content of one of your messages.

    TEXT is the new content; use - to read it from stdin, or --body-file PATH.
    """
    rt = runtime()
    content = read_body(text, body_file, what="new message")
    if not content.strip():
        raise click.UsageError("the new text is empty; use `thrum message delete` to remove a message")
    result = rt.agent_call("message.edit", {"message_id": msg_id, "content": content})
    version = result.get("version")
    suffix = f" (version {version})" if version is not None else ""
    rt.emit(result, f"> Message edited: {result.get('message_id', msg_id)}{suffix}")


@message.command("delete", context_settings=CONTEXT_SETTINGS)
@click.argument("msg_id", metavar="MSG_ID")
@click.option("--force", is_flag=True, help="Required: confirm the deletion (it cannot be undone).")
@click.option("--reason", metavar="TEXT", help="Why it was deleted (stored with the deletion).")
@global_options()
def delete(msg_id: str, force: bool, reason: str | None) -> None:
    """Soft-delete one of your messages (needs --force)."""
    if not force:
        raise click.UsageError(f"refusing to delete {msg_id} without --force (deletion cannot be undone)")
    rt = runtime()
    params = {"message_id": msg_id}
    if reason:
        params["reason"] = reason
    result = rt.agent_call("message.delete", params)
    rt.emit(result, f"> Message deleted: {result.get('message_id', msg_id)}")


@message.command("read", context_settings=CONTEXT_SETTINGS)
@click.argument("msg_ids", nargs=-1, metavar="MSG_ID...")
@click.option("--all", "all_", is_flag=True, help="Mark every unread message as read.")
@global_options()
def read(msg_ids: str, all_: bool) -> None:
    """Mark messages as read (by id, or --all)."""
    if all_ and msg_ids:
        raise click.UsageError("give message ids or --all, not both")
    if not all_ and not msg_ids:
        raise click.UsageError("give one or more message ids, or --all")
    rt = runtime()
    params = {"all": True} if all_ else {"message_ids": list(dict.fromkeys(msg_ids))}
    result = rt.agent_call("message.markRead", params)
    count = int(result.get("marked_count") or 0)
    rt.emit(result, f"> Marked {plural(count, 'message')} as read")  # also_read_by: in --json


@message.command("unread", context_settings=CONTEXT_SETTINGS)
@click.argument("msg_ids", nargs=-1, required=True, metavar="MSG_ID...")
@global_options()
def unread(msg_ids: str) -> None:
    """Mark messages as unread: they are back among your unread messages."""
    rt = runtime()
    ids = list(dict.fromkeys(msg_ids))
    result = rt.agent_call("message.markUnread", {"message_ids": ids})
    count = int(result.get("marked_count") or 0)
    rt.emit(result, f"> Marked {plural(count, 'message')} as unread")
    archived = [m for m in result.get("archived") or [] if isinstance(m, str)]
    if archived and not rt.opts.json:
        rt.note(archived_note(len(archived), of=len(ids)))


@message.command("archive", context_settings=CONTEXT_SETTINGS)
@click.argument("msg_ids", nargs=-1, required=True, metavar="MSG_ID...")
@global_options()
def archive(msg_ids: str) -> None:
    """Archive messages: they leave your inbox (see them with `thrum inbox --archived`).

    They stay readable with `thrum message get` and in their thread. Archiving a
    message that is already archived says so and fails.
    """
    rt = runtime()
    result = rt.agent_call("message.archive", {"message_ids": list(dict.fromkeys(msg_ids))})
    count = int(result.get("archived_count") or 0)
    already = [m for m in result.get("already_archived") or [] if isinstance(m, str)]
    rt.emit(result, f"> Archived {plural(count, 'message')}")
    if already:
        raise ThrumError(f"already archived: {', '.join(already)}")


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("msg_ids", nargs=-1, required=True, metavar="MSG_ID...")
@global_options()
def ack(msg_ids: str) -> None:
    """Acknowledge messages sent to you: their sender sees them as acked.

    A message sent with `thrum send --ack` keeps coming back to you (with a higher
    priority once its deadline passes) until you ack it. MSG_ID may be a unique prefix.
    """
    rt = runtime()
    result = rt.agent_call("message.ack", {"message_ids": list(dict.fromkeys(msg_ids))})
    count = int(result.get("acked_count") or 0)
    already = [m for m in result.get("already_acked") or [] if isinstance(m, str)]
    text = f"> Acknowledged {plural(count, 'message')}"
    if already:
        text += f" ({len(already)} acknowledged before: {', '.join(already)})"
    rt.emit(result, text)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--page-size", type=click.IntRange(1, 100), default=10, show_default=True, help="Messages per page.")
@click.option("--page", type=click.IntRange(1, None), default=1, show_default=True, help="Page number.")
@click.option("--unacked", is_flag=True, help="Only messages that asked for an ack some recipient has not given.")
@global_options()
def sent(page_size: int, page: int, unacked: bool) -> None:
    """List the messages you sent, newest first, with how far each recipient got.

    Each recipient's state: sent, delivered (in its replica), surfaced (a hook or
    tool put it in the agent's context), read, acked (see docs/design/delivery.md).
    """
    rt = runtime()
    params = {"page": page, "page_size": page_size}
    if unacked:
        params["unacked"] = True
    result = rt.agent_call("message.sent", params)
    width = shutil.get_terminal_size((DEFAULT_WIDTH + 2, 24)).columns - 2
    rt.emit(result, lambda: render_sent(result, width=width))

"""``thrum send`` and ``thrum reply``: one message.send call each."""

from __future__ import annotations

import json
from typing import Any

import click

from ..events.values import FORMATS, PRIORITIES
from .common import CONTEXT_SETTINGS, Runtime, bare_address, global_options, parse_tag, read_body, runtime


def _structured(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        json.loads(text)
    except ValueError as exc:
        raise click.UsageError(f"--structured is not valid JSON ({exc}); nothing was sent") from None
    return text


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, flag: str) -> int:
    """``90``, ``90s``, ``10m``, ``2h``, ``1d`` → seconds.

    Raises:
        click.UsageError: anything else, or not positive.
    """
    t = text.strip().lower()
    unit = _UNITS.get(t[-1:], None)
    number = t[:-1] if unit else t
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        raise click.UsageError(f"{flag} expects a duration such as 90s, 10m, 2h or 1d, got {text!r}") from None
    if not value >= 1:
        raise click.UsageError(f"{flag} must be at least one second, got {text!r}")
    return int(value)


def _addresses(values: tuple[str, ...], flag: str) -> list[str]:
    out = []
    for v in values:
        for part in v.split(","):
            name = bare_address(part)
            if not name:
                raise click.UsageError(f"{flag} needs a name, role or group (e.g. {flag} @reviewer), got {v!r}")
            if name not in out:
                out.append(name)
    return out


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("message", required=False, metavar="[MESSAGE]")
@click.option(
    "--to",
    "to",
    multiple=True,
    metavar="@NAME",
    help="Recipient: an agent, a role, a group or @everyone (repeatable; @ optional).",
)
@click.option(
    "--mention",
    "mention",
    multiple=True,
    metavar="@ROLE",
    help="Mention an agent, role or group (repeatable; @ optional).",
)
@click.option(
    "--scope", "scope", multiple=True, metavar="TYPE:VALUE", help="Attach a scope, e.g. module:auth (repeatable)."
)
@click.option(
    "--ref", "ref", multiple=True, metavar="TYPE:VALUE", help="Attach a reference, e.g. issue:beads-42 (repeatable)."
)
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="markdown", show_default=True, help="Content format."
)
@click.option(
    "--priority", type=click.Choice(PRIORITIES), default="normal", show_default=True, help="Message priority."
)
@click.option("--structured", metavar="JSON", help="Typed JSON payload for machines (validated locally).")
@click.option("--body-file", metavar="PATH", help="Read the message from a file (- for stdin).")
@click.option("--thread", "thread_id", metavar="THREAD_ID", help="Post into an existing thread.")
@click.option("--subject", metavar="TEXT", help="A subject line, shown above the message.")
@click.option("--broadcast", is_flag=True, help="Deprecated: same as --to @everyone.")
@click.option("--ack", "ack", is_flag=True, help="Ask every recipient to acknowledge (`thrum ack ID`).")
@click.option(
    "--ack-within",
    metavar="DURATION",
    help="Ask for an ack within this time (90s, 10m, 2h, 1d; implies --ack). An overdue ack is shown "
    "to the recipient again, with a higher priority, and listed by `thrum sent --unacked`.",
)
@global_options()
def send(
    message: str | None,
    to: tuple[str, ...],
    mention: tuple[str, ...],
    scope: tuple[str, ...],
    ref: tuple[str, ...],
    fmt: str,
    priority: str,
    structured: str | None,
    body_file: str | None,
    thread_id: str | None,
    subject: str | None,
    broadcast: bool,
    ack: bool,
    ack_within: str | None,
) -> None:
    """Send a message.

    MESSAGE is the text; use - to read it from stdin, or --body-file PATH.

    \b
    Examples:
      thrum send "Auth module complete" --to @reviewer --scope module:auth --ref issue:beads-42
      thrum send "Deploy complete" --to @everyone --subject "Release 1.4"
      git log -1 | thrum send - --to @reviewer --format plain
      thrum send "Freeze main until I say so" --to @everyone --ack-within 10m
    """
    rt = runtime()
    scopes = [parse_tag("--scope", s) for s in scope]
    refs = [parse_tag("--ref", r) for r in ref]
    recipients = _addresses(to, "--to")
    mentions = _addresses(mention, "--mention")
    structured = _structured(structured)
    if broadcast:
        rt.warn("--broadcast is deprecated; use --to @everyone")
        if "everyone" not in recipients:
            recipients.append("everyone")
    content = read_body(message, body_file)
    if not content.strip() and not structured:
        raise click.UsageError("the message is empty; nothing was sent")

    params: dict[str, Any] = {"content": content, "format": fmt, "priority": priority}
    if structured is not None:
        params["structured"] = structured
    optional = {"to": recipients, "mentions": mentions, "scopes": scopes, "refs": refs}
    optional.update(thread_id=thread_id, subject=subject)
    params.update((key, value) for key, value in optional.items() if value)
    if ack_within:
        params["ack_within"] = parse_duration(ack_within, "--ack-within")
    if ack or ack_within:
        params["ack"] = True
    result = rt.agent_call("message.send", params)
    rt.emit(result, lambda: _sent_text(result))
    _note(rt, result)


def _sent_text(result: dict[str, Any]) -> str:
    lines = [f"> Message sent: {result.get('message_id')}"]
    targets = result.get("recipients") or []
    if targets:
        shown = []
        for r in targets:
            addr = r.get("address") if isinstance(r, dict) else r
            kind = r.get("kind") if isinstance(r, dict) else None
            shown.append(f"@{str(addr).lstrip('@')}" + (f" ({kind})" if kind else ""))
        lines.append("  To: " + ", ".join(shown))
    return "\n".join(lines)


def _note(rt: Runtime, result: dict[str, Any]) -> None:
    """A role nobody holds yet: one line on stderr (the answer's ``note``; in --json, only there)."""
    if result.get("note") and not rt.opts.json:
        rt.note(f"note: {result['note']}")


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("msg_id", metavar="MSG_ID")
@click.argument("text", required=False, metavar="TEXT")
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="markdown", show_default=True, help="Content format."
)
@click.option(
    "--to", "to", multiple=True, metavar="@NAME", help="Also address an agent, role or group (repeatable; @ optional)."
)
@click.option(
    "--mention",
    "mention",
    multiple=True,
    metavar="@ROLE",
    help="Also mention an agent, role or group (repeatable; @ optional).",
)
@click.option("--body-file", metavar="PATH", help="Read the reply from a file (- for stdin).")
@click.option("--subject", metavar="TEXT", help="A subject line, shown above the reply.")
@global_options()
def reply(
    msg_id: str,
    text: str | None,
    fmt: str,
    to: tuple[str, ...],
    mention: tuple[str, ...],
    body_file: str | None,
    subject: str | None,
) -> None:
    """Reply to a message (links it with a reply_to ref and marks it read).

    The reply mentions the author of the message, so it reaches them in
    `thrum inbox --mentions` and wakes `thrum wait --mentions`. MSG_ID may be a
    unique prefix. TEXT is the reply; use - to read it from stdin, or --body-file PATH.

    \b
    Example:
      thrum reply msg_01HXE... "Looks good, merging now"
    """
    rt = runtime()
    recipients = _addresses(to, "--to")
    mentions = _addresses(mention, "--mention")
    content = read_body(text, body_file, what="reply")
    if not content.strip():
        raise click.UsageError("the reply is empty; nothing was sent")
    params: dict[str, Any] = {"content": content, "format": fmt, "reply_to": msg_id}
    if recipients:
        params["to"] = recipients
    if mentions:
        params["mentions"] = mentions
    if subject:
        params["subject"] = subject
    result = rt.agent_call("message.send", params)
    parent = result.get("reply_to") or msg_id  # the full id when a prefix was given
    rt.best_effort("message.markRead", {"message_ids": [parent]})
    rt.emit(result, f"> Reply sent: {result.get('message_id')}\n  In reply to: {parent}")
    _note(rt, result)

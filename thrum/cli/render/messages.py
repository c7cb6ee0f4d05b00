"""The message views of the CLI: the inbox, a thread, the thread list, one message, sent messages.

Pure (no I/O): ``now`` and ``width`` are passed in, so tests compare exact strings.

Rules:

1. Inbox: one box; each message has a header ``│ ● msg_…  @author  5m ago``
   (``●`` unread, ``○`` read, ``(edited)`` when edited) and its body below;
   replies follow their parent on the page with ``↳`` instead of the
   indicator; the footer is ``Showing A-B of N messages (U unread)``.
2. A box is as wide as the terminal (between ``MIN_WIDTH`` and ``MAX_WIDTH``),
   wider only when a header needs it; long bodies are cut after a number of
   lines with a hint to the command that shows them whole.
3. The empty inbox names the filters in use and the size of the inbox without them.
"""

from __future__ import annotations

import json
import textwrap
from datetime import datetime
from typing import Any

from .delivery import delivery_lines, delivery_summary
from .fields import author_of, body_of, is_edited, mentions_of, read_by_names, reply_to_of
from .text import at, clean, display_width, pad, plural, relative_time, table, tag_text

MIN_WIDTH = 40
MAX_WIDTH = 118
DEFAULT_WIDTH = 78
INBOX_BODY_LINES = 40


# --------------------------------------------------------------------------- inbox and threads


def _thread_page(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], bool, str | None]]:
    """Order a page: each top-level message followed by the replies (on this page)
    in its chain, oldest reply first. Returns ``(message, is_reply, orphan_parent)``."""
    by_id = {m.get("message_id"): m for m in messages}

    def root_of(m: dict[str, Any]) -> str | None:
        seen = set()
        cur = m
        while True:
            parent = reply_to_of(cur)
            if not parent or parent not in by_id or parent in seen:
                return cur.get("message_id")
            seen.add(parent)
            cur = by_id[parent]

    children: dict[str | None, list[dict[str, Any]]] = {}
    order: list[dict[str, Any]] = []
    for m in messages:
        root = root_of(m)
        if root != m.get("message_id"):
            children.setdefault(root, []).append(m)
        else:
            order.append(m)
    out = []
    for m in order:
        parent = reply_to_of(m)
        out.append((m, parent is not None, parent))  # a reply whose parent is not on this page
        for child in sorted(children.get(m.get("message_id"), []), key=lambda c: str(c.get("created_at", ""))):
            out.append((child, True, None))
    return out


def _wrap(text: str, width: int, limit: int | None, more_hint: str) -> list[str]:
    lines: list[str] = []
    for para in clean(text).split("\n"):
        if not para.strip():
            lines.append("")
            continue
        lines.extend(
            textwrap.wrap(
                para,
                width=width,
                break_long_words=True,
                break_on_hyphens=False,
                drop_whitespace=True,
                replace_whitespace=False,
            )
            or [""]
        )
    while lines and not lines[-1]:
        lines.pop()
    if limit is not None and len(lines) > limit:
        hidden = len(lines) - limit
        lines = lines[:limit] + [f"… {plural(hidden, 'more line')} ({more_hint})"]
    return lines or [""]


def inbox_header(
    msg: dict[str, Any], *, reply: bool, now: datetime | None = None, id_width: int = 0, author_width: int = 0
) -> str:
    """One header line; ``id_width``/``author_width`` pad those columns so a page lines up (spec)."""
    mark = "↳" if reply else ("○" if msg.get("is_read") else "●")
    parts = [
        f"{mark} {pad(str(msg.get('message_id', '?')), id_width)}",
        pad(at(clean(author_of(msg))), author_width),
        relative_time(msg.get("created_at"), now),
    ]
    if is_edited(msg):
        parts.append("(edited)")
    if reply and not msg.get("is_read", True):
        parts.append("(unread)")
    if msg.get("priority") in ("high", "critical"):
        parts.append(f"[{msg['priority']}]")
    return "  ".join(parts)


def render_inbox(
    result: dict[str, Any],
    *,
    width: int = DEFAULT_WIDTH,
    now: datetime | None = None,
    filters: list[tuple[str, str | None]] | None = None,
    unfiltered_total: int | None = None,
    body_lines: int | None = INBOX_BODY_LINES,
) -> str:
    """The inbox text for a message.list result.

    ``filters`` is ``[(flag, value or None)]`` as typed, e.g. ``[("scope", "module:auth")]``;
    ``unfiltered_total`` is the inbox size without them (for the empty state).
    """
    messages = [m for m in result.get("messages") or [] if isinstance(m, dict)]
    total = int(result.get("total") or 0)
    unread = int(result.get("unread") or 0)
    page = int(result.get("page") or 1)
    page_size = int(result.get("page_size") or len(messages) or 10)
    if not messages:
        return render_inbox_empty(
            total=total,
            page=page,
            total_pages=result.get("total_pages"),
            filters=filters or [],
            unfiltered_total=unfiltered_total,
        )

    rows = _thread_page(messages)
    id_width = max(display_width(str(m.get("message_id", "?"))) for m, _, _ in rows)
    author_width = max(display_width(at(clean(author_of(m)))) for m, _, _ in rows)
    headers = [
        inbox_header(m, reply=reply, now=now, id_width=id_width, author_width=author_width) for m, reply, _ in rows
    ]
    inner = max(min(max(width, MIN_WIDTH), MAX_WIDTH), max(display_width(h) + 2 for h in headers))
    body_width = inner - 2
    out = ["┌" + "─" * inner + "┐"]
    for i, ((msg, reply, orphan_parent), header) in enumerate(zip(rows, headers)):
        if i and (not reply or orphan_parent):
            out.append("├" + "─" * inner + "┤")
        out.append("│ " + pad(header, inner - 1) + "│")
        indent = "  " if reply else ""
        if orphan_parent:  # its parent is not on this page (or is my own message)
            out.append("│ " + pad(f"{indent}in reply to {orphan_parent}", inner - 1) + "│")
        for line in _message_lines(msg, body_width - len(indent), body_lines):
            out.append("│ " + pad(indent + line, inner - 1) + "│")
    out.append("└" + "─" * inner + "┘")
    start = (page - 1) * page_size + 1
    end = start + len(messages) - 1
    out.append(f"Showing {start}-{end} of {plural(total, 'message')} ({unread} unread)")
    return "\n".join(out)


def _message_lines(msg: dict[str, Any], width: int, body_lines: int | None) -> list[str]:
    """A message's text in a box: its subject (if any), then its wrapped content."""
    hint = f"thrum message get {msg.get('message_id')}"
    lines = []
    subject = clean(msg.get("subject") or "").strip()
    if subject:
        lines += _wrap(f"Subject: {subject}", width, 2, hint)
    return lines + _wrap(body_of(msg).get("content") or "", width, body_lines, hint)


def render_thread(
    result: dict[str, Any],
    *,
    width: int = DEFAULT_WIDTH,
    now: datetime | None = None,
    body_lines: int | None = INBOX_BODY_LINES,
) -> str:
    """``thrum thread show``: every message of a thread, oldest first, replies marked ↳."""
    messages = [m for m in result.get("messages") or [] if isinstance(m, dict)]
    headers = [inbox_header(m, reply=bool(reply_to_of(m)) and i > 0, now=now) for i, m in enumerate(messages)]
    inner = max(min(max(width, MIN_WIDTH), MAX_WIDTH), max((display_width(h) + 2 for h in headers), default=0))
    unread = sum(1 for m in messages if not m.get("is_read", True))
    title = f"Thread {result.get('thread_id') or '?'}: {plural(len(messages), 'message')}"
    out = [title + (f" ({unread} unread)" if unread else ""), "┌" + "─" * inner + "┐"]
    for i, (msg, header) in enumerate(zip(messages, headers)):
        if i:
            out.append("├" + "─" * inner + "┤")
        out.append("│ " + pad(header, inner - 1) + "│")
        for line in _message_lines(msg, inner - 2, body_lines):
            out.append("│ " + pad(line, inner - 1) + "│")
    out.append("└" + "─" * inner + "┘")
    return "\n".join(out)


def render_threads(result: dict[str, Any], *, now: datetime | None = None) -> str:
    """``thrum thread list``: one row per thread, newest activity first."""
    threads = [t for t in result.get("threads") or [] if isinstance(t, dict)]
    if not threads:
        return "No threads."
    rows = []
    for t in threads:
        title = clean(t.get("subject") or t.get("preview") or "").replace("\n", " ").strip()
        if len(title) > 50:
            title = title[:49] + "…"
        rows.append(
            [
                t.get("thread_id", "?"),
                t.get("message_count", 0),
                t.get("unread_count", 0),
                relative_time(t.get("last_activity"), now),
                at(clean(t.get("last_sender") or "?")),
                title,
            ]
        )
    total = int(result.get("total") or len(threads))
    page = int(result.get("page") or 1)
    page_size = int(result.get("page_size") or len(threads))
    start = (page - 1) * page_size + 1
    footer = f"Showing {start}-{start + len(threads) - 1} of {plural(total, 'thread')}"
    return table(["THREAD", "MESSAGES", "UNREAD", "LAST ACTIVITY", "LAST FROM", "SUBJECT"], rows) + "\n" + footer


def filter_flags(filters: list[tuple[str, str | None]]) -> tuple[str, str]:
    """``(--scope module:auth --mentions, scope=module:auth, mentions)``."""
    flags = " ".join(f"--{k} {v}" if v else f"--{k}" for k, v in filters)
    desc = ", ".join(f"{k}={v}" if v else k for k, v in filters)
    return flags, desc


def archived_note(archived: int, *, of: int) -> str:
    """What ``thrum message unread`` says of the ``archived`` messages among the ``of``
    it was given: marked unread, they stay out of the inbox (an archive is final)."""
    one = archived == 1
    if archived == of:
        who = "it is" if one else "they are"
    else:
        who = f"{archived} of them {'is' if one else 'are'}"
    return (
        f"{who} archived and {'stays' if one else 'stay'} out of the inbox "
        f"(`thrum inbox --archived` lists {'it' if one else 'them'})"
    )


def next_page_command(
    filters: list[tuple[str, str | None]],
    *,
    page: int,
    page_size: int,
    default_page_size: int = 10,
    context: list[tuple[str, str]] | None = None,
    command: str = "inbox",
) -> str:
    """The command for page ``page`` with every filter in use repeated, so following
    it shows the same list (and ``--unread`` still does not mark anything read).

    ``context`` are the global flags that chose the repository and the identity
    (``--repo``, ``--name``, ``--role``, ``--module``), repeated first so the hint
    works as printed; values are shell-quoted where they need it.
    """
    import shlex

    words = ["thrum", *command.split()]
    for flag, value in (context or []) + list(filters):
        words.append(f"--{flag}")
        if value:
            words.append(shlex.quote(value))
    if page_size != default_page_size:
        words += ["--page-size", str(page_size)]
    words += ["--page", str(page)]
    return " ".join(words)


def render_inbox_empty(
    *,
    total: int,
    page: int = 1,
    total_pages: Any = None,
    filters: list[tuple[str, str | None]],
    unfiltered_total: int | None,
) -> str:
    if filters:
        flags, desc = filter_flags(filters)
        grand = unfiltered_total if unfiltered_total is not None else total
        return (
            f"No messages matching filter {flags}\n"
            f"Showing 0 of {grand} total {'message' if grand == 1 else 'messages'} (filter: {desc})"
        )
    if total and page > 1:
        pages = total_pages or "?"
        return (
            f"No messages on page {page} ({plural(total, 'message')}, {plural(int(pages), 'page')})"
            if isinstance(pages, int)
            else f"No messages on page {page} ({plural(total, 'message')})"
        )
    return "No messages in inbox."


# --------------------------------------------------------------------------- one message


def render_message(msg: dict[str, Any], *, now: datetime | None = None) -> str:
    """The ``thrum message get`` block: labelled fields in one aligned column (the
    spec's two-space indent and 9-column labels, wider only when a longer label
    such as ``Priority:`` is shown), scopes and refs in the order given."""
    fields = [("From:", at(clean(author_of(msg)))), ("Time:", relative_time(msg.get("created_at"), now))]
    subject = clean(msg.get("subject") or "").replace("\n", " ").strip()
    if subject:
        fields.insert(0, ("Subject:", subject))
    if msg.get("deleted"):
        fields.append(("Status:", "DELETED"))
        meta = msg.get("metadata")
        reason = msg.get("delete_reason") or (meta.get("delete_reason") if isinstance(meta, dict) else None)
        if reason:
            fields.append(("Reason:", clean(reason)))
    scopes = msg.get("scopes") or []
    if scopes:
        fields.append(("Scopes:", ", ".join(clean(tag_text(s)) for s in scopes)))
    refs = msg.get("refs") or []
    if refs:
        fields.append(("Refs:", ", ".join(clean(tag_text(r)) for r in refs)))
    if is_edited(msg):
        fields.append(("Edited:", relative_time(msg.get("updated_at"), now)))
    if msg.get("priority") and msg.get("priority") != "normal":
        fields.append(("Priority:", clean(msg["priority"])))
    label_width = max(9, max(len(label) + 1 for label, _ in fields))
    lines = [f"Message: {msg.get('message_id', '?')}"]
    lines += [f"  {label:<{label_width}}{value}" for label, value in fields]
    body = body_of(msg)
    lines.append("")
    lines.append(clean(body.get("content") or "").rstrip("\n"))
    structured = body.get("structured")
    if structured:
        if isinstance(structured, str):
            try:
                structured = json.loads(structured)
            except ValueError:
                pass
        text = structured if isinstance(structured, str) else json.dumps(structured, indent=2, ensure_ascii=False)
        lines += ["", "Structured:", clean(text)]
    extra = delivery_lines(msg, now)
    if extra:
        lines += [""] + extra
    return "\n".join(lines)


# --------------------------------------------------------------------------- sent


def render_sent(
    result: dict[str, Any], *, width: int = DEFAULT_WIDTH, now: datetime | None = None, body_lines: int | None = 10
) -> str:
    messages = [m for m in result.get("messages") or [] if isinstance(m, dict)]
    total = int(result.get("total") or 0)
    page = int(result.get("page") or 1)
    page_size = int(result.get("page_size") or len(messages) or 10)
    if not messages:
        return "No sent messages."
    headers = []
    for m in messages:
        parts = [str(m.get("message_id", "?"))]
        to = mentions_of(m)
        if to:
            parts.append("to " + ", ".join(at(clean(t)) for t in to))
        parts.append(relative_time(m.get("created_at"), now))
        if is_edited(m):
            parts.append("(edited)")
        if m.get("deleted"):
            parts.append("(deleted)")
        headers.append("  ".join(parts))
    inner = max(min(max(width, MIN_WIDTH), MAX_WIDTH), max(display_width(h) + 2 for h in headers))
    out = ["┌" + "─" * inner + "┐"]
    for i, (m, header) in enumerate(zip(messages, headers)):
        if i:
            out.append("├" + "─" * inner + "┤")
        out.append("│ " + pad(header, inner - 1) + "│")
        hint = f"thrum message get {m.get('message_id')}"
        for line in _wrap(body_of(m).get("content") or "", inner - 2, body_lines, hint):
            out.append("│ " + pad(line, inner - 1) + "│")
        readers = read_by_names(m.get("read_by"))
        seen = "Read by: " + (", ".join(at(clean(n)) for n in readers) if readers else "nobody yet")
        for line in textwrap.wrap(seen, inner - 2) or [seen]:
            out.append("│ " + pad(line, inner - 1) + "│")
        if m.get("delivery") or m.get("ack"):
            summary = delivery_summary(m)
            for line in textwrap.wrap(summary, inner - 2) or [summary]:
                out.append("│ " + pad(line, inner - 1) + "│")
    out.append("└" + "─" * inner + "┘")
    start = (page - 1) * page_size + 1
    out.append(f"Showing {start}-{start + len(messages) - 1} of {plural(total, 'sent message')}")
    return "\n".join(out)

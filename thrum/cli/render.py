"""Pure text rendering for the CLI: RPC results in, strings out.

No I/O, no click, no daemon: every function takes the data and (where it
matters) ``now`` and ``width``, so tests can compare exact strings.

Rules:

1. Inbox: one box; each message has a header ``│ ● msg_…  @author  5m ago``
   (``●`` unread, ``○`` read, ``(edited)`` when edited) and its body below;
   replies follow their parent on the page with ``↳`` instead of the
   indicator; the footer is ``Showing A-B of N messages (U unread)``.
2. Empty states are the spec's exact texts.
3. Text from messages is untrusted: control characters (terminal escapes) are
   made visible, never written raw.
"""

from __future__ import annotations

import json
import re
import textwrap
import unicodedata
from datetime import datetime, timezone
from typing import Any, Iterable

MIN_WIDTH = 40
MAX_WIDTH = 118
DEFAULT_WIDTH = 78
INBOX_BODY_LINES = 40

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# --------------------------------------------------------------------------- small pieces

def clean(text: Any) -> str:
    """Untrusted text made safe for a terminal (tabs expanded, controls visible)."""
    text = "" if text is None else str(text)
    text = text.replace("\r\n", "\n").expandtabs(4)
    return _CONTROL.sub(lambda m: "\\x%02x" % ord(m.group()), text)


def parse_time(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def relative_time(value: Any, now: datetime | None = None) -> str:
    """``just now``, ``5m ago``, ``3h ago``, ``2d ago``; older than a week: ``Jan 2`` (``Jan 2 2025``)."""
    dt = parse_time(value)
    if dt is None:
        return str(value or "-")
    now = now or datetime.now(timezone.utc)
    secs = (now - dt).total_seconds()
    if secs < 60:
        return "just now"
    if secs < 3600:
        return f"{int(secs // 60)}m ago"
    if secs < 86400:
        return f"{int(secs // 3600)}h ago"
    if secs < 7 * 86400:
        return f"{int(secs // 86400)}d ago"
    local = dt.astimezone(now.tzinfo)
    label = f"{local:%b} {local.day}"
    return label if local.year == now.year else f"{label} {local.year}"


def duration(seconds: Any) -> str:
    """``45s``, ``5m 12s``, ``2h 3m``, ``3d 4h``."""
    try:
        s = int(float(seconds))
    except (TypeError, ValueError):
        return str(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def display_width(text: str) -> int:
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def at(name: Any) -> str:
    name = str(name or "?")
    return name if name.startswith("@") else f"@{name}"


def tag_text(tag: Any) -> str:
    if isinstance(tag, dict):
        return f"{tag.get('type', '?')}:{tag.get('value', '?')}"
    return str(tag)


def table(headers: list[str], rows: Iterable[list[Any]]) -> str:
    rows = [[clean(c) if c not in (None, "") else "-" for c in row] for row in rows]
    widths = [display_width(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], display_width(cell))
    lines = ["  ".join(pad(h, widths[i]) for i, h in enumerate(headers)).rstrip()]
    for row in rows:
        lines.append("  ".join(pad(c, widths[i]) for i, c in enumerate(row)).rstrip())
    return "\n".join(lines)


# --------------------------------------------------------------------------- message fields

def author_of(msg: dict[str, Any]) -> str:
    author = msg.get("author")
    if isinstance(author, dict):
        return author.get("name") or author.get("agent_id") or "?"
    return msg.get("author_name") or msg.get("agent_id") or msg.get("author_id") or "?"


def body_of(msg: dict[str, Any]) -> dict[str, Any]:
    body = msg.get("body")
    if isinstance(body, dict):
        return body
    return {"format": "markdown", "content": "" if body is None else str(body), "structured": ""}


def reply_to_of(msg: dict[str, Any]) -> str | None:
    parent = msg.get("reply_to")
    if isinstance(parent, str) and parent:
        return parent
    for ref in msg.get("refs") or ():
        if isinstance(ref, dict) and ref.get("type") == "reply_to" and ref.get("value"):
            return str(ref["value"])
    return None


def is_edited(msg: dict[str, Any]) -> bool:
    if msg.get("edited") is True:
        return True
    if isinstance(msg.get("version"), int) and msg["version"] > 1:
        return True
    updated, created = msg.get("updated_at"), msg.get("created_at")
    return bool(updated) and updated != created


def mentions_of(msg: dict[str, Any]) -> list[str]:
    out = []
    for ref in msg.get("refs") or ():
        if isinstance(ref, dict) and ref.get("type") == "mention" and ref.get("value"):
            out.append(ref["value"])
    if not out:
        for r in msg.get("recipients") or msg.get("to") or ():
            value = r.get("address") if isinstance(r, dict) else r
            if value:
                out.append(str(value).lstrip("@"))
    return out


def read_by_names(read_by: Any) -> list[str]:
    if isinstance(read_by, dict):
        return sorted(read_by)
    names = []
    for item in read_by or ():
        if isinstance(item, dict):
            names.append(item.get("agent_id") or item.get("name") or "?")
        else:
            names.append(str(item))
    return names


# --------------------------------------------------------------------------- inbox

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
        lines.extend(textwrap.wrap(para, width=width, break_long_words=True, break_on_hyphens=False,
                                   drop_whitespace=True, replace_whitespace=False) or [""])
    while lines and not lines[-1]:
        lines.pop()
    if limit is not None and len(lines) > limit:
        hidden = len(lines) - limit
        lines = lines[:limit] + [f"… {plural(hidden, 'more line')} ({more_hint})"]
    return lines or [""]


def inbox_header(msg: dict[str, Any], *, reply: bool, now: datetime | None = None, id_width: int = 0,
                 author_width: int = 0) -> str:
    """One header line; ``id_width``/``author_width`` pad those columns so a page lines up (spec)."""
    mark = "↳" if reply else ("○" if msg.get("is_read") else "●")
    parts = [f"{mark} {pad(str(msg.get('message_id', '?')), id_width)}", pad(at(clean(author_of(msg))), author_width),
             relative_time(msg.get("created_at"), now)]
    if is_edited(msg):
        parts.append("(edited)")
    if reply and not msg.get("is_read", True):
        parts.append("(unread)")
    if msg.get("priority") in ("high", "critical"):
        parts.append(f"[{msg['priority']}]")
    return "  ".join(parts)


def render_inbox(result: dict[str, Any], *, width: int = DEFAULT_WIDTH, now: datetime | None = None,
                 filters: list[tuple[str, str | None]] | None = None, unfiltered_total: int | None = None,
                 body_lines: int | None = INBOX_BODY_LINES) -> str:
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
        return render_inbox_empty(total=total, page=page, total_pages=result.get("total_pages"),
                                  filters=filters or [], unfiltered_total=unfiltered_total)

    rows = _thread_page(messages)
    id_width = max(display_width(str(m.get("message_id", "?"))) for m, _, _ in rows)
    author_width = max(display_width(at(clean(author_of(m)))) for m, _, _ in rows)
    headers = [inbox_header(m, reply=reply, now=now, id_width=id_width, author_width=author_width)
               for m, reply, _ in rows]
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


def render_thread(result: dict[str, Any], *, width: int = DEFAULT_WIDTH, now: datetime | None = None,
                  body_lines: int | None = INBOX_BODY_LINES) -> str:
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
        rows.append([t.get("thread_id", "?"), t.get("message_count", 0), t.get("unread_count", 0),
                     relative_time(t.get("last_activity"), now), at(clean(t.get("last_sender") or "?")), title])
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


def next_page_command(filters: list[tuple[str, str | None]], *, page: int, page_size: int,
                      default_page_size: int = 10, identity: list[tuple[str, str]] | None = None) -> str:
    """The command for page ``page`` with every filter in use repeated, so following
    it shows the same list (and ``--unread`` still does not mark anything read)."""
    import shlex

    words = ["thrum", "inbox"]
    for flag, value in (identity or []) + list(filters):
        words.append(f"--{flag}")
        if value:
            words.append(shlex.quote(value))
    if page_size != default_page_size:
        words += ["--page-size", str(page_size)]
    words += ["--page", str(page)]
    return " ".join(words)


def render_inbox_empty(*, total: int, page: int = 1, total_pages: Any = None,
                       filters: list[tuple[str, str | None]], unfiltered_total: int | None) -> str:
    if filters:
        flags, desc = filter_flags(filters)
        grand = unfiltered_total if unfiltered_total is not None else total
        return (f"No messages matching filter {flags}\n"
                f"Showing 0 of {grand} total {'message' if grand == 1 else 'messages'} (filter: {desc})")
    if total and page > 1:
        pages = total_pages or "?"
        return f"No messages on page {page} ({plural(total, 'message')}, {plural(int(pages), 'page')})" \
            if isinstance(pages, int) else f"No messages on page {page} ({plural(total, 'message')})"
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
    return "\n".join(lines)


# --------------------------------------------------------------------------- sent

def render_sent(result: dict[str, Any], *, width: int = DEFAULT_WIDTH, now: datetime | None = None,
                body_lines: int | None = 10) -> str:
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
    out.append("└" + "─" * inner + "┘")
    start = (page - 1) * page_size + 1
    out.append(f"Showing {start}-{start + len(messages) - 1} of {plural(total, 'sent message')}")
    return "\n".join(out)


# --------------------------------------------------------------------------- agents, sessions, groups

def render_agents(agents: list[dict[str, Any]], *, now: datetime | None = None, me: str | None = None) -> str:
    if not agents:
        return "No agents registered."
    rows = []
    for a in agents:
        name = a.get("name") or a.get("agent_id") or "?"
        active = a.get("active_sessions")
        status = "active" if (active if isinstance(active, bool) else (active or 0) > 0) else "offline"
        if a.get("deleted"):
            status = "deleted"
        rows.append([at(name) + (" (you)" if me and name == me else ""), a.get("role"), a.get("module"),
                     a.get("display"), status, relative_time(a.get("last_seen_at"), now)
                     if a.get("last_seen_at") else "-"])
    return table(["AGENT", "ROLE", "MODULE", "DISPLAY", "STATUS", "LAST SEEN"], rows)


def render_identity(ident: dict[str, Any], session: dict[str, Any] | None = None, *,
                    now: datetime | None = None) -> str:
    lines = [f"Agent:   {at(ident.get('name'))}",
             f"Role:    {ident.get('role') or '-'}",
             f"Module:  {ident.get('module') or '-'}"]
    if ident.get("display"):
        lines.append(f"Display: {clean(ident['display'])}")
    if session:
        lines.append(f"Session: {session.get('session_id')} (started {relative_time(session.get('started_at'), now)})")
    elif session is not None:
        lines.append("Session: none active")
    return "\n".join(lines)


def render_sessions(sessions: list[dict[str, Any]], *, now: datetime | None = None) -> str:
    if not sessions:
        return "No sessions."
    rows = []
    for s in sessions:
        status = "active" if s.get("active") or not s.get("ended_at") else (s.get("end_reason") or "ended")
        rows.append([s.get("session_id"), at(s.get("agent_id")), relative_time(s.get("started_at"), now),
                     relative_time(s.get("ended_at"), now) if s.get("ended_at") else "-", status])
    return table(["SESSION", "AGENT", "STARTED", "ENDED", "STATUS"], rows)


def member_text(member: Any) -> str:
    if isinstance(member, dict):
        kind = member.get("type") or member.get("member_type") or "agent"
        value = member.get("value") or member.get("member_value") or member.get("member") or "?"
    else:
        kind, value = "agent", str(member)
    return at(value) if kind == "agent" else f"{kind}:{value}"


def render_groups(groups: list[dict[str, Any]]) -> str:
    if not groups:
        return "No groups."
    rows = []
    for g in groups:
        desc = g.get("description") or ""
        if g.get("builtin"):
            desc = (desc + " (built-in)").strip()
        count = g.get("member_count")
        rows.append([at(g.get("name")), "-" if count is None else str(count), desc])
    return table(["GROUP", "MEMBERS", "DESCRIPTION"], rows)


def render_group_info(group: dict[str, Any], *, now: datetime | None = None) -> str:
    lines = [f"Group: {at(group.get('name'))}"]
    if group.get("description"):
        lines.append(f"  Description: {clean(group['description'])}")
    if group.get("builtin"):
        lines.append("  Built-in:    yes (all registered agents; cannot be deleted)")
    if group.get("created_at") or group.get("created_by"):
        created = relative_time(group.get("created_at"), now) if group.get("created_at") else ""
        by = f" by {at(group['created_by'])}" if group.get("created_by") else ""
        lines.append(f"  Created:     {created}{by}".rstrip())
    members = group.get("members")
    if members is not None:
        lines.append("  Members:     " + (", ".join(member_text(m) for m in members) if members else "none"))
    return "\n".join(lines)


def render_members(result: dict[str, Any]) -> str:
    if "agents" in result:
        agents = result.get("agents") or []
        return "\n".join(at((a.get("name") or a.get("value") or a.get("agent_id")) if isinstance(a, dict) else a)
                         for a in agents) or "No members."
    members = result.get("members") or []
    return "\n".join(member_text(m) for m in members) or "No members."


def render_daemon_status(st: dict[str, Any], *, now: datetime | None = None) -> str:
    if not st.get("running"):
        lines = ["Daemon:  not running"]
    else:
        extra = []
        if st.get("pid"):
            extra.append(f"pid {st['pid']}")
        if st.get("uptime") is not None:
            extra.append(f"up {duration(st['uptime'])}")
        lines = ["Daemon:  running" + (f" ({', '.join(extra)})" if extra else "")]
    for label, key in (("Socket:", "socket"), ("Repo:", "repo"), ("Version:", "version"),
                       ("WS port:", "ws_port"), ("Log:", "log")):
        if st.get(key) not in (None, ""):
            lines.append(f"{label:<9}{st[key]}")
    sync = st.get("sync")
    if isinstance(sync, dict) and sync:
        mode = sync.get("mode") or ("local" if not sync.get("remote") else "remote")
        text = f"{mode}"
        if sync.get("remote"):
            text += f" ({sync['remote']})"
        if sync.get("last_success"):
            text += f", last success {relative_time(sync['last_success'], now)}"
        if sync.get("last_error"):
            text += f", last error: {clean(sync['last_error'])}"
        lines.append(f"{'Sync:':<9}{text}")
    view = st.get("view")
    if isinstance(view, dict) and view.get("state") == "behind":
        lines.append(f"{'View:':<9}behind the log ({clean(str(view.get('error') or '?'))}); "
                     "writes are stored, queries show them once it catches up")
    return "\n".join(lines)

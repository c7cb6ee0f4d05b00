"""``thrum search``: results in the inbox's box, each with its snippet, hits marked «like this».

Pure (no I/O): ``now`` and ``width`` are passed in, so tests compare exact strings.

Rules:

1. Results keep the order the daemon ranked them in (best first); each has the
   inbox's header (``● msg_…  @author  5m ago``), its subject when it has one,
   then the snippet: the part of the body around the hits, wrapped, at most
   `SNIPPET_LINES` lines. A hit is shown between « and ».
2. The footer says how many messages match, as the inbox does:
   ``Showing A-B of N matches``.
3. No match: one line naming the query, and what was searched.
"""

from __future__ import annotations

import textwrap
from datetime import datetime
from typing import Any

from .fields import author_of
from .messages import DEFAULT_WIDTH, MAX_WIDTH, MIN_WIDTH, inbox_header
from .text import at, clean, display_width, pad, plural

SNIPPET_LINES = 6
HIT_OPEN, HIT_CLOSE = "«", "»"


def marked(segments: Any) -> str:
    """Snippet segments (``[{text, hit}]``) as one line of text, hits between « and »."""
    out = []
    for seg in segments if isinstance(segments, list) else []:
        if not isinstance(seg, dict):
            continue
        text = clean(seg.get("text") or "")
        out.append(f"{HIT_OPEN}{text}{HIT_CLOSE}" if seg.get("hit") and text else text)
    return "".join(out)


def _lines(text: str, width: int, limit: int) -> list[str]:
    flat = " ".join(text.split())
    lines = textwrap.wrap(flat, width=width, break_long_words=True, break_on_hyphens=False) or [""]
    if len(lines) > limit:
        lines = lines[:limit]
        lines[-1] = lines[-1][: max(0, width - 2)] + " …"
    return lines


def render_search(
    result: dict[str, Any], *, query: str, width: int = DEFAULT_WIDTH, now: datetime | None = None
) -> str:
    """The text of a message.search result for ``query`` (as typed)."""
    messages = [m for m in result.get("messages") or [] if isinstance(m, dict)]
    total = int(result.get("total") or 0)
    page = int(result.get("page") or 1)
    page_size = int(result.get("page_size") or len(messages) or 10)
    shown = clean(query)
    if not messages:
        if total:
            return f"No results on page {page}: {plural(total, 'message')} match {shown!r}."
        return (
            f"No message matches {shown!r}. Searched: your inbox's messages (not deleted, not archived; "
            "is:archived searches your archive)."
        )
    id_width = max(display_width(str(m.get("message_id", "?"))) for m in messages)
    author_width = max(display_width(at(clean(author_of(m)))) for m in messages)
    headers = [inbox_header(m, reply=False, now=now, id_width=id_width, author_width=author_width) for m in messages]
    inner = max(min(max(width, MIN_WIDTH), MAX_WIDTH), max(display_width(h) + 2 for h in headers))
    text_width = inner - 2
    out = ["┌" + "─" * inner + "┐"]
    for i, (msg, header) in enumerate(zip(messages, headers)):
        if i:
            out.append("├" + "─" * inner + "┤")
        out.append("│ " + pad(header, inner - 1) + "│")
        subject = marked(msg.get("subject_snippet")) or clean(msg.get("subject") or "")
        lines = _lines(f"Subject: {subject}", text_width, 2) if subject.strip() else []
        lines += _lines(marked(msg.get("snippet")), text_width, SNIPPET_LINES)
        out += ["│ " + pad(line, inner - 1) + "│" for line in lines]
    out.append("└" + "─" * inner + "┘")
    start = (page - 1) * page_size + 1
    end = start + len(messages) - 1
    out.append(f"Showing {start}-{end} of {plural(total, 'match', 'matches')}")
    return "\n".join(out)

"""What goes between the tools and the daemon: addresses in; messages, agents and errors out.

Pure functions over the daemon's replies (no calls):

- `parse_address`: a tool's ``to`` (``@ops``, ``ops``, ``agent:ops:abc123``) as
  the address the daemon resolves (spec "Addressing");
- `message_info`, `agent_info`: a reply as the spec's MessageInfo / AgentInfo;
- `one_line`: a daemon error as the one line a tool error carries, with the
  CLI's hints reworded for MCP;
- `framed`: a tool result whose text for the model is the messages framed as
  untrusted data from other agents (`thrum.framing`); the structured result
  carries the same fields, each body neutralised.
"""

import json
import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from .. import framing
from ..events.names import NAME_RE
from .models import AgentInfo, MessageInfo, SearchHit
from .presence import agent_status
from .waiter import sender_of

COMPOSITE_RE = re.compile(r"agent:(" + NAME_RE.pattern + r"):[A-Za-z0-9_-]+")  # agent:role:hash
_CLI_HINTS = (
    ("(use --role to add a role)", '(use member_type "role" to add a role)'),
    ("(see `thrum group list`)", "(see list_groups)"),
)


def one_line(text: str) -> str:
    text = " ".join(part.strip() for part in str(text).splitlines() if part.strip()) or "error"
    for cli, mcp in _CLI_HINTS:
        text = text.replace(cli, mcp)
    return text


def parse_address(to: str) -> str:
    """``@ops`` / ``ops`` / ``agent:ops:abc123`` → ``ops`` (spec "Addressing").

    Raises:
        ToolError: empty.
    """
    text = (to or "").strip()
    composite = COMPOSITE_RE.fullmatch(text)
    if composite:
        return composite.group(1)
    bare = text.lstrip("@").strip()
    if not bare:
        raise ToolError("to is empty: give an agent name, @role, @group or @everyone")
    return bare


def message_info(m: dict[str, Any]) -> MessageInfo:
    """A message.list item or message.get result as the spec's MessageInfo."""
    body = m.get("body") or {}
    metadata = None
    structured = body.get("structured") or ""
    if structured:
        try:
            parsed = json.loads(structured)
            metadata = parsed if isinstance(parsed, dict) else {"value": parsed}
        except ValueError:
            metadata = {"value": structured}
    return MessageInfo(
        message_id=m.get("message_id", ""),
        from_=sender_of(m),
        content=framing.neutralise(body.get("content") or ""),
        priority=m.get("priority") or "normal",
        timestamp=m.get("created_at") or "",
        thread_id=m.get("thread_id") or "",
        reply_to=m.get("reply_to") or "",
        to=[f"@{r['value']}" for r in m.get("refs") or [] if r.get("type") == "mention"],
        metadata=metadata,
    )


def marked(segments: object) -> str:
    """Snippet segments (``[{text, hit}]``) as text, each hit between « and »."""
    parts = []
    for seg in segments if isinstance(segments, list) else []:
        if isinstance(seg, dict) and seg.get("text"):
            parts.append(f"«{seg['text']}»" if seg.get("hit") else str(seg["text"]))
    return "".join(parts)


def search_hit(m: dict[str, Any]) -> SearchHit:
    """A message.search item as a SearchHit: the MessageInfo fields, subject, snippet, score."""
    info = message_info(m)
    return SearchHit(
        **info.model_dump(by_alias=False),
        subject=framing.neutralise(m.get("subject") or ""),
        snippet=framing.neutralise(marked(m.get("snippet"))),
        score=float(m.get("score") or 0.0),
    )


def agent_info(a: dict[str, Any], now: datetime) -> AgentInfo:
    return AgentInfo(
        name=a.get("name") or a.get("agent_id") or "",
        role=a.get("role") or "",
        module=a.get("module") or "",
        status=agent_status(a, now),
        last_seen_at=a.get("last_seen_at") or "",
    )


def framed(model: BaseModel, messages: list[dict[str, Any]], agent: str) -> CallToolResult:
    """``model`` as the structured result, and as its text the ``messages`` framed
    (`thrum.framing.frame`, no budget cut: the tool's caller asked for them)."""
    text, _ = framing.frame(messages, agent=agent, boundary=framing.new_boundary(), budget=10**9)
    structured = model.model_dump(mode="json", by_alias=True)
    summary = {k: v for k, v in structured.items() if k not in ("messages", "message")}
    head = json.dumps(summary, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=head + ("\n" + text if text else ""))],
        structured_content=structured,
    )

"""The 13 MCP tools (spec/mcp-server.md "API Reference", ``acknowledge``, ``search_messages``): a few daemon calls each.

Rules:

1. A tool parses its typed arguments, calls the daemon through the `DaemonLink`
   as this agent, and returns a model from `thrum.mcp.models`.
2. A failure is an MCP tool error with one line saying why (a `ToolError`);
   daemon errors keep their message, with CLI-only hints reworded for MCP.
3. Presence (``status``, ``recipient_status``) follows the spec's status
   derivation: `thrum.mcp.presence`. Replies become the spec's shapes in
   `thrum.mcp.convert`.
4. Messages handed to the agent (``check_messages``, ``wait_for_message``) reach
   its context framed as untrusted data from other agents (`convert.framed`) and
   are recorded as surfaced to it (docs/design/delivery.md).

No ``from __future__ import annotations`` here: the SDK reads these signatures
to build the input schemas.
"""

import functools
import logging
from datetime import datetime, timezone
from typing import Annotated, Any, Awaitable, Callable, Optional, ParamSpec, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from ..errors import ThrumError
from .convert import agent_info, framed, message_info, one_line, parse_address, search_hit
from .models import (
    AckResult,
    BroadcastFilter,
    BroadcastResult,
    CheckResult,
    GetGroupResult,
    GroupChange,
    GroupInfo,
    GroupMember,
    ListAgentsResult,
    ListGroupsResult,
    MemberChange,
    MemberType,
    Priority,
    PriorityFilter,
    SearchResult,
    SendResult,
    WaitResult,
)
from .presence import agent_status, as_seen_by_agents, proxies, recipient_status, send_with_audience
from .link import DaemonLink
from .waiter import Waiter, WaitBusy, sender_of

log = logging.getLogger(__name__)

MAX_RECIPIENTS = 256  # the daemon's limit on addresses per message
CHECK_PAGE = 100  # the daemon's largest page


P = ParamSpec("P")
R = TypeVar("R")


def _tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Daemon errors become one-line tool errors."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except ThrumError as exc:
            raise ToolError(one_line(exc.message or str(exc))) from None

    return wrapper


# --------------------------------------------------------------------------- the tools


def build_tools(link: DaemonLink, waiter: Waiter) -> list[Tool]:
    """The 13 tools bound to this server's daemon link and waiter."""
    me = link.me

    async def surfaced(ids: list[str], via: str) -> None:
        """Record that these messages reached the agent's context (best effort: the answer goes out anyway)."""
        try:
            await link.agent_call("message.surface", {"message_ids": ids, "via": via})
        except ThrumError as exc:
            log.warning("could not record %d messages as surfaced: %s", len(ids), exc.message)

    @_tool_errors
    async def send_message(
        to: Annotated[
            str,
            Field(
                description="Recipient: an agent name, @role, @group, @everyone, or a "
                "composite agent:role:hash (its role is used)"
            ),
        ],
        content: Annotated[str, Field(min_length=1, description="Message text (markdown)")],
        reply_to: Annotated[
            Optional[str], Field(description="Message ID to reply to (the reply joins its thread)")
        ] = None,
        priority: Annotated[Priority, Field(description="critical, high, normal (default) or low")] = "normal",
        metadata: Annotated[
            Optional[dict[str, Any]], Field(description="Key-value data sent with the message (structured)")
        ] = None,
    ) -> SendResult:
        address = parse_address(to)
        params: dict[str, Any] = {"content": content, "to": [f"@{address}"], "priority": priority}
        if reply_to:
            params["reply_to"] = reply_to.strip()
        if metadata is not None:
            params["structured"] = metadata
        sent, agents = await send_with_audience(link, params)
        recipients = sent.get("recipients") or []
        kind = recipients[0]["kind"] if recipients else ""
        return SendResult(
            status="delivered",
            message_id=sent["message_id"],
            thread_id=sent.get("thread_id", ""),
            recipient_status=await recipient_status(link, kind, address, agents),
            note=sent.get("note", ""),
        )

    @_tool_errors
    async def check_messages(
        limit: Annotated[int, Field(ge=1, le=1000, description="Most messages to return (default 50)")] = 50,
    ) -> Annotated[CallToolResult, CheckResult]:
        size = min(limit, CHECK_PAGE)
        messages: list[dict[str, Any]] = []
        total = 0
        page = 1
        while len(messages) < limit:
            result = await link.agent_call(
                "message.list",
                {
                    "mentions": True,
                    "unread": True,
                    "exclude_own": True,
                    "sort_order": "asc",
                    "page_size": size,
                    "page": page,
                },
            )
            if page == 1:
                total = int(result.get("total") or 0)
            batch = [m for m in result.get("messages") or [] if sender_of(m) != me]
            messages.extend(batch)
            if not result.get("messages") or page >= (result.get("total_pages") or 1):
                break
            page += 1
        messages = messages[:limit]
        ids = [m["message_id"] for m in messages]
        marked = 0
        if ids:
            await link.agent_call("message.markRead", {"message_ids": ids})
            marked = len(ids)
            waiter.consumed(ids)
            await surfaced(ids, "mcp check_messages")
        result = CheckResult(
            status="messages" if messages else "empty",
            messages=[message_info(m) for m in messages],
            remaining=max(0, total - marked),
        )
        return framed(result, messages, me)

    @_tool_errors
    async def wait_for_message(
        timeout: Annotated[  # noqa: ASYNC109 (the spec names this argument)
            int,
            Field(ge=0, le=600, description="Most seconds to wait (default 300, max 600)"),
        ] = 300,
        priority_filter: Annotated[
            PriorityFilter,
            Field(
                description="all (default), critical, high_and_above or normal_and_above; other messages stay "
                "queued for a later wait or check_messages"
            ),
        ] = "all",
        ctx: Optional[Context] = None,  # injected by the SDK (not an argument): the request id, for late cancels
    ) -> Annotated[CallToolResult, WaitResult]:
        await link.ensure_connected()
        request_id = ctx.request_id if ctx is not None else None
        try:
            message, waited = await waiter.wait(float(timeout), priority_filter, request_id=request_id)
        except WaitBusy as exc:
            raise ToolError(exc.message) from None
        if message:
            await surfaced([message["message_id"]], "mcp wait_for_message")
        result = WaitResult(
            status="message_received" if message else "timeout",
            message=message_info(message) if message else None,
            waited_seconds=int(round(waited)),
        )
        return framed(result, [message] if message else [], me)

    @_tool_errors
    async def acknowledge(
        message_ids: Annotated[
            list[str],
            Field(min_length=1, max_length=1000, description="IDs of messages addressed to this agent"),
        ],
    ) -> AckResult:
        result = await link.agent_call("message.ack", {"message_ids": [m.strip() for m in message_ids]})
        acked = list(result.get("acked") or [])
        return AckResult(
            status="acked" if acked else "already_acked",
            acked=acked,
            already_acked=list(result.get("already_acked") or []),
        )

    @_tool_errors
    async def search_messages(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=1000,
                description="Words (all must match; snake_case, dotted.names and paths are found whole and by "
                'their parts), "a phrase", pref*, -word (without it), and filters: from:NAME, from:me, '
                "to:NAME, to:@ROLE, to:me, scope:TYPE:VALUE, ref:TYPE:VALUE, in:THREAD_ID, is:unread, "
                "is:archived, priority:high, after:2026-03-01, before:2026-03-08, after:3d",
            ),
        ],
        limit: Annotated[int, Field(ge=1, le=100, description="Results per page (default 20)")] = 20,
        page: Annotated[int, Field(ge=1, le=100_000, description="Page of results (default 1)")] = 1,
    ) -> Annotated[CallToolResult, SearchResult]:
        found = await link.agent_call("message.search", {"query": query, "page_size": limit, "page": page})
        messages = found.get("messages") or []
        result = SearchResult(
            status="results" if messages else "empty",
            messages=[search_hit(m) for m in messages],
            total=int(found.get("total") or 0),
            page=int(found.get("page") or page),
            total_pages=int(found.get("total_pages") or 0),
        )
        return framed(result, messages, me)

    @_tool_errors
    async def list_agents(
        include_offline: Annotated[
            bool, Field(strict=True, description="Include agents not seen in the last 15 minutes (default true)")
        ] = True,
    ) -> ListAgentsResult:
        now = datetime.now(timezone.utc)
        agents = [
            agent_info(a, now)
            for a in as_seen_by_agents((await link.call("agent.list")).get("agents") or [])
            if not a.get("deleted")
        ]
        if not include_offline:
            agents = [a for a in agents if a.status != "offline"]
        return ListAgentsResult(agents=agents, count=len(agents))

    @_tool_errors
    async def broadcast_message(
        content: Annotated[str, Field(min_length=1, description="Message text to broadcast (markdown)")],
        priority: Annotated[Priority, Field(description="critical, high, normal (default) or low")] = "normal",
        filter: Annotated[Optional[BroadcastFilter], Field(description="Optional recipient filters")] = None,
    ) -> BroadcastResult:
        flt = filter or BroadcastFilter()
        now = datetime.now(timezone.utc)
        listed = (await link.call("agent.list")).get("agents") or []
        hidden = proxies(listed)  # Gas City mailboxes' agents: reached through their mailboxes, never named
        others = [a for a in listed if not a.get("deleted") and a.get("name") != me and a.get("name") not in hidden]
        excluded = {x.strip().lstrip("@") for x in flt.exclude if x.strip()}
        chosen = [
            a
            for a in others
            if a.get("name") not in excluded
            and a.get("role") not in excluded
            and (flt.status == "all" or agent_status(a, now) == "active")
        ]
        names = [a["name"] for a in chosen]
        if not names:
            return BroadcastResult(status="no_recipients", sent_to=[], failed_to=[], total_sent=0, message_ids=[])
        batches = (
            [["everyone"]]
            if len(chosen) == len(others)
            else [names[i : i + MAX_RECIPIENTS] for i in range(0, len(names), MAX_RECIPIENTS)]
        )
        sent_to: list[str] = []
        failed_to: list[str] = []
        ids: list[str] = []
        reasons: list[str] = []
        for batch in batches:
            reached = names if batch == ["everyone"] else batch
            try:
                sent = await link.agent_call("message.send", {"content": content, "to": batch, "priority": priority})
            except ThrumError as exc:
                failed_to.extend(reached)
                reasons.append(exc.message)
                continue
            ids.append(sent["message_id"])
            sent_to.extend(reached)
        if not sent_to:
            raise ToolError(f"broadcast failed: {one_line(reasons[0])}")
        return BroadcastResult(
            status="partial" if failed_to else "sent",
            sent_to=sent_to,
            failed_to=failed_to,
            total_sent=len(sent_to),
            message_ids=ids,
        )

    @_tool_errors
    async def create_group(
        name: Annotated[str, Field(description="Group name (lowercase letters, digits, _), e.g. reviewers")],
        description: Annotated[str, Field(description="Human-readable description")] = "",
    ) -> GroupChange:
        result = await link.agent_call("group.create", {"name": name.strip(), "description": description})
        return GroupChange(status="created", name=result["group"]["name"])

    @_tool_errors
    async def delete_group(
        name: Annotated[str, Field(description="Group to delete (@everyone cannot be deleted)")],
    ) -> GroupChange:
        result = await link.agent_call("group.delete", {"name": name.strip()})
        return GroupChange(status="deleted", name=result["name"])

    @_tool_errors
    async def add_group_member(
        group: Annotated[str, Field(description="Group to add the member to")],
        member_type: Annotated[MemberType, Field(description="agent or role")],
        member_id: Annotated[str, Field(description="Agent name or role name")],
    ) -> MemberChange:
        result = await link.agent_call(
            "group.member.add", {"group": group.strip(), "member": member_id.strip(), "member_type": member_type}
        )
        return MemberChange(
            status="added", group=result["group"], member_type=result["member_type"], member_id=result["member"]
        )

    @_tool_errors
    async def remove_group_member(
        group: Annotated[str, Field(description="Group to remove the member from")],
        member_type: Annotated[MemberType, Field(description="agent or role")],
        member_id: Annotated[str, Field(description="Agent name or role name")],
    ) -> MemberChange:
        result = await link.agent_call(
            "group.member.remove", {"group": group.strip(), "member": member_id.strip(), "member_type": member_type}
        )
        return MemberChange(
            status="removed", group=result["group"], member_type=result["member_type"], member_id=result["member"]
        )

    @_tool_errors
    async def list_groups() -> ListGroupsResult:
        groups = (await link.call("group.list")).get("groups") or []
        return ListGroupsResult(
            groups=[
                GroupInfo(
                    name=g["name"],
                    description=g.get("description") or "",
                    created_at=g.get("created_at") or "",
                    created_by=g.get("created_by") or "",
                    member_count=int(g.get("member_count") or 0),
                )
                for g in groups
            ]
        )

    @_tool_errors
    async def get_group(
        name: Annotated[str, Field(description="Group name")],
        expand: Annotated[
            bool, Field(strict=True, description="Also resolve roles to the agents they stand for")
        ] = False,
    ) -> GetGroupResult:
        info = (await link.call("group.info", {"name": name.strip()}))["group"]
        out = GetGroupResult(
            name=info["name"],
            description=info.get("description") or "",
            created_at=info.get("created_at") or "",
            created_by=info.get("created_by") or "",
            members=[GroupMember(type=m["type"], id=m["value"]) for m in info.get("members") or []],
        )
        if expand:
            agents = (await link.call("group.members", {"name": info["name"], "expand": True})).get("agents") or []
            out.expanded_agents = list(agents)
            out.expanded_agents_count = len(agents)
        return out

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    specs: list[tuple[Callable[..., Any], str, ToolAnnotations | None]] = [
        (
            send_message,
            "Send a message to an agent, a role (@role), a group (@group) or @everyone. An unknown "
            "recipient is an error naming close matches; recipient_status says whether someone "
            "is around to read it.",
            None,
        ),
        (
            check_messages,
            "Return unread messages for this agent (mentioning its name, role, groups or "
            "@everyone; never its own), oldest first, and mark them read. remaining counts the "
            "unread messages still waiting.",
            None,
        ),
        (
            wait_for_message,
            "Block until a new message for this agent arrives (pushed by the daemon, no "
            "polling) or the timeout passes; returns it marked read. Messages that arrived "
            "while no wait was running are returned first. One wait at a time. Meant for a "
            "background listener: call check_messages first, then wait_for_message(timeout=300) "
            "in a loop.",
            None,
        ),
        (
            search_messages,
            "Search the messages this agent can see (what its inbox holds: not deleted, not archived unless "
            "is:archived; its own included) by words and filters; best matches first, recent ones first among "
            "equals, each with its full text and a snippet whose hits are between « and ». total is exact. "
            "Marks nothing read.",
            read_only,
        ),
        (
            list_agents,
            "List the registered agents with role, module and status (active: seen in the last 2 minutes).",
            read_only,
        ),
        (
            broadcast_message,
            "Send a message to every other agent, optionally only the active ones or leaving some out by name or role.",
            None,
        ),
        (create_group, "Create a named group for targeted messaging (@name).", None),
        (
            delete_group,
            "Delete a group (the built-in @everyone cannot be deleted).",
            ToolAnnotations(destructive_hint=True, open_world_hint=False),
        ),
        (add_group_member, "Add an agent or a role to a group.", None),
        (remove_group_member, "Remove an agent or a role from a group.", None),
        (list_groups, "List every group, @everyone included, with member counts.", read_only),
        (get_group, "Show a group and its members; expand=true also lists the agents its roles stand for.", read_only),
        (
            acknowledge,
            "Acknowledge messages addressed to this agent: the sender sees them as acked (thrum send --ack asks "
            "for this; an ack that is overdue comes back with higher priority until given).",
            ToolAnnotations(idempotent_hint=True, open_world_hint=False),
        ),
    ]
    return [
        Tool.from_function(fn, name=fn.__name__, description=text, annotations=annotations)
        for fn, text, annotations in specs
    ]

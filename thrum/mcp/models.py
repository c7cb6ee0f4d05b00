"""Typed inputs and outputs of the MCP tools (spec/mcp-server.md "API Reference").

Every tool returns one of these models, so hosts get ``structuredContent`` and an
output schema. Field names are the spec's; a few fields the spec does not list
(``thread_id``, ``reply_to``, ``to``, ``metadata`` on a message) are added because an
agent needs them to answer in the right thread.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Priority = Literal["critical", "high", "normal", "low"]
PriorityFilter = Literal["all", "critical", "high_and_above", "normal_and_above"]
MemberType = Literal["agent", "role"]
AgentStatus = Literal["active", "idle", "offline"]  # thrum.presence: one definition everywhere
RecipientStatus = Literal["active", "idle", "offline", "known", "unknown"]


def _unset(value: Any) -> bool:
    return value is None


def _no_default(schema: dict[str, Any]) -> None:
    """An optional field that is left out when unset: its schema has its type and no
    ``default: null`` (the value is never null on the wire)."""
    schema.pop("default", None)


class _Out(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class MessageInfo(_Out):
    message_id: str = Field(description="Message identifier")
    from_: str = Field(alias="from", description="Sender agent name")
    content: str = Field(description="Message text (markdown)")
    priority: Priority = Field(description="critical, high, normal or low")
    timestamp: str = Field(description="Creation time (RFC 3339, UTC)")
    thread_id: str = Field("", description="Thread the message belongs to")
    reply_to: str = Field("", description="Message this one replies to (empty if none)")
    to: list[str] = Field(default_factory=list, description="Addresses the message was sent to (@name)")
    metadata: dict[str, Any] | None = Field(None, description="Structured data sent with the message")


class SendResult(_Out):
    status: Literal["delivered"] = Field(description="delivered: the message is stored durably")
    message_id: str = Field(description="ID of the sent message")
    thread_id: str = Field(description="Thread of the sent message (reply_to keeps the parent's)")
    recipient_status: RecipientStatus = Field(
        description="active: the recipient (or one agent it stands for) was seen in the last 2 minutes, "
        "on any machine; idle: in the last 15 minutes; offline: not seen lately; known: a group or role "
        "that currently stands for no agent; unknown: the status could not be determined"
    )
    note: str = Field("", description="Something the sender should know, e.g. that nobody holds a role yet")


class CheckResult(_Out):
    status: Literal["messages", "empty"]
    messages: list[MessageInfo] = Field(description="Unread messages for this agent, oldest first; now marked read")
    remaining: int = Field(description="Unread messages for this agent still waiting after these")


class SearchHit(MessageInfo):
    subject: str = Field("", description="The message's subject line (empty if none)")
    snippet: str = Field(description="The text around the hits, each hit between « and »")
    score: float = Field(description="Relevance (higher is better): bm25, boosted for recent messages")


class SearchResult(_Out):
    status: Literal["results", "empty"]
    messages: list[SearchHit] = Field(description="Best matches first; reading them marks nothing read")
    total: int = Field(description="Messages matching the query in all (exact), not only these")
    page: int
    total_pages: int


class WaitResult(_Out):
    status: Literal["message_received", "timeout"]
    message: MessageInfo | None = Field(description="The received message (null on timeout); now marked read")
    waited_seconds: int = Field(description="How long the wait lasted, in whole seconds")


class AckResult(_Out):
    status: Literal["acked", "already_acked"]
    acked: list[str] = Field(description="Messages acknowledged now (the sender sees them as acked)")
    already_acked: list[str] = Field(description="Messages this agent had acknowledged before")


class AgentInfo(_Out):
    name: str = Field(description="Agent name (its address: @name)")
    role: str
    module: str
    status: AgentStatus = Field(
        description="active: seen in the last 2 minutes (on any machine); idle: in the last 15 minutes; "
        "offline otherwise"
    )
    last_seen_at: str = Field(description="Its newest event in the log (RFC 3339; empty if never)")


class ListAgentsResult(_Out):
    agents: list[AgentInfo]
    count: int


class BroadcastFilter(BaseModel):
    """Who a broadcast reaches besides 'every other agent'."""

    model_config = ConfigDict(extra="forbid")
    status: Literal["all", "active"] = Field(
        "all", description="all (default) or active: only agents seen in the last 2 minutes"
    )
    exclude: list[str] = Field(default_factory=list, description="Agent names or roles to leave out")


class BroadcastResult(_Out):
    status: Literal["sent", "partial", "no_recipients"]
    sent_to: list[str] = Field(description="Names of the agents the message reached")
    failed_to: list[str] = Field(description="Names of the agents a send failed for")
    total_sent: int = Field(description="Number of agents reached")
    message_ids: list[str] = Field(
        description="IDs of the messages sent (one per 256 recipients, or one "
        "to @everyone when no filter narrows the audience)"
    )


class GroupChange(_Out):
    status: Literal["created", "deleted"]
    name: str


class MemberChange(_Out):
    status: Literal["added", "removed"]
    group: str
    member_type: MemberType
    member_id: str


class GroupInfo(_Out):
    name: str
    description: str
    created_at: str = Field(description="RFC 3339 creation time (empty for the built-in @everyone)")
    created_by: str = Field(description="Agent that created the group (empty for @everyone)")
    member_count: int = Field(description="Direct members (agents and roles); for @everyone every agent")


class ListGroupsResult(_Out):
    groups: list[GroupInfo]


class GroupMember(_Out):
    type: MemberType
    id: str = Field(description="Agent name or role name")


class GetGroupResult(_Out):
    name: str
    description: str
    created_at: str
    created_by: str
    members: list[GroupMember]
    # Present only with expand=true (spec): left out of the output, not null, otherwise.
    # None marks "absent" (excluded from the output); the schema says what a present value is.
    expanded_agents: list[str] = Field(
        None,  # type: ignore[arg-type]
        exclude_if=_unset,
        json_schema_extra=_no_default,
        description="Only with expand=true: the agents the members stand for",
    )
    expanded_agents_count: int = Field(  # type: ignore[assignment]
        None, exclude_if=_unset, json_schema_extra=_no_default, description="Only with expand=true"
    )

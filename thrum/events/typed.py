"""Typed events: the frozen dataclasses the write path builds.

Each is validated on construction (through `normalise`, the same rules the log is
read with), knows its stream and encodes as one line. `from_dict` turns a decoded
dict back into its type; a type or version this build does not know becomes an
`UnknownEvent`, kept and passed on. The fold works on the normalised dicts
directly (the fast path for rebuilds); these classes are for building events.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from ..errors import ValidationError
from .codec import encode_line
from .ids import new_id, new_ulid, now_rfc3339
from .validation import NORMALISERS, is_known, normalise
from .shards import stream_for
from .tags import TAG_TYPE_RE, split_tag
from .values import EVENT_VERSION


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base of every typed event. Don't construct directly; use a subclass."""

    TYPE: ClassVar[str] = ""
    event_id: str = field(default_factory=new_ulid)
    timestamp: str = field(default_factory=now_rfc3339)
    v: int = EVENT_VERSION

    def __post_init__(self) -> None:
        normalise(self.to_dict())  # raises ValidationError on any bad field

    @property
    def type(self) -> str:
        return self.TYPE

    def to_dict(self) -> dict[str, Any]:
        d = {"type": self.TYPE, "timestamp": self.timestamp, "event_id": self.event_id, "v": self.v}
        for f in fields(self):
            if f.name not in d:
                value = getattr(self, f.name)
                if f.name in _OMIT_EMPTY and not value:
                    continue
                d[f.name] = _plain(value)
        return d

    def to_line(self) -> bytes:
        return encode_line(self.to_dict())

    @property
    def stream(self) -> str:
        return stream_for(self.to_dict())


_OMIT_EMPTY = frozenset(
    {"idempotency_key", "ack", "ack_within", "via", "invite", "since", "from_event"}
)  # optional fields added later: lines without them stay as they were


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Tag):
        return {"type": value.type, "value": value.value}
    if isinstance(value, Body):
        return {"format": value.format, "content": value.content, "structured": value.structured}
    return value


@dataclass(frozen=True)
class Tag:
    """A scope or ref: ``{"type": ..., "value": ...}``."""

    type: str
    value: str

    @classmethod
    def parse(cls, text: str, what: str = "value") -> "Tag":
        """``type:value`` as typed on the command line."""
        parts = split_tag(text) if isinstance(text, str) else None
        if parts is None or not TAG_TYPE_RE.fullmatch(parts[0]):
            raise ValidationError(f"{what} must look like type:value (got {str(text)[:60]!r})", field=what)
        return cls(*parts)


@dataclass(frozen=True)
class Body:
    content: str
    format: str = "markdown"
    structured: str = ""


@dataclass(frozen=True, kw_only=True)
class MessageCreate(Event):
    TYPE: ClassVar[str] = "message.create"
    message_id: str = field(default_factory=lambda: new_id("msg"))
    thread_id: str = ""
    agent_id: str
    session_id: str
    body: Body
    scopes: tuple[Tag, ...] = ()
    refs: tuple[Tag, ...] = ()
    priority: str = "normal"
    authored_by: str = ""
    disclosed: bool = False
    idempotency_key: str = ""  # optional: omitted from the line when empty
    subject: str = ""
    ack: bool = False  # the sender asks each recipient to acknowledge (omitted when false)
    ack_within: int = 0  # seconds after `timestamp` the ack is due (omitted when 0: no deadline)

    def to_dict(self) -> dict[str, Any]:
        """Without ``subject`` when it is empty: lines of messages without one stay as they were."""
        d = super().to_dict()
        if not d["subject"]:
            del d["subject"]
        return d


@dataclass(frozen=True, kw_only=True)
class MessageEdit(Event):
    TYPE: ClassVar[str] = "message.edit"
    message_id: str
    agent_id: str
    session_id: str = ""
    body: Body
    idempotency_key: str = ""  # optional: omitted from the line when empty


@dataclass(frozen=True, kw_only=True)
class MessageDelete(Event):
    TYPE: ClassVar[str] = "message.delete"
    message_id: str
    agent_id: str
    session_id: str = ""
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class ThreadCreate(Event):
    TYPE: ClassVar[str] = "thread.create"
    thread_id: str = field(default_factory=lambda: new_id("thr"))
    title: str = ""
    created_by: str


@dataclass(frozen=True, kw_only=True)
class AgentRegister(Event):
    TYPE: ClassVar[str] = "agent.register"
    agent_id: str
    kind: str = "agent"
    name: str = ""
    role: str
    module: str = ""
    worktree: str = ""
    display: str = ""
    public_key: str = ""  # base64 Ed25519 key the event is signed with (thrum.trust)

    def __post_init__(self) -> None:
        if not self.name:  # the name is the agent id; fill it so the event equals its decoded self
            object.__setattr__(self, "name", self.agent_id)
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class AgentUpdate(Event):
    TYPE: ClassVar[str] = "agent.update"
    agent_id: str
    work_contexts: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class AgentHeartbeat(Event):
    """``agent_id`` was around (thrum.presence): written by the daemon holding its key,
    at most once per ``presence_interval``, only while it writes nothing else."""

    TYPE: ClassVar[str] = "agent.heartbeat"
    agent_id: str


@dataclass(frozen=True, kw_only=True)
class AgentCleanup(Event):
    TYPE: ClassVar[str] = "agent.cleanup"
    agent_id: str
    reason: str = ""
    method: str = "manual"
    by: str = ""  # the agent who removed ``agent_id`` (signs the event); empty: itself


@dataclass(frozen=True, kw_only=True)
class AgentAdmit(Event):
    """An admin admits ``agent_id`` with a key, or with an invite key its redeemer proves."""

    TYPE: ClassVar[str] = "agent.admit"
    agent_id: str
    by: str
    public_key: str = ""
    invite: str = ""


@dataclass(frozen=True, kw_only=True)
class AgentRotate(Event):
    """``agent_id`` moves from ``old_key`` to ``public_key`` (signed with the old key)."""

    TYPE: ClassVar[str] = "agent.rotate"
    agent_id: str
    public_key: str
    old_key: str


@dataclass(frozen=True, kw_only=True)
class AgentRevoke(Event):
    """Lines of ``agent_id`` signed with ``public_key`` from a point on no longer count."""

    TYPE: ClassVar[str] = "agent.revoke"
    agent_id: str
    by: str
    public_key: str
    since: str = ""
    from_event: str = ""
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class SessionStart(Event):
    TYPE: ClassVar[str] = "agent.session.start"
    session_id: str = field(default_factory=lambda: new_id("ses"))
    agent_id: str


@dataclass(frozen=True, kw_only=True)
class SessionEnd(Event):
    TYPE: ClassVar[str] = "agent.session.end"
    session_id: str
    agent_id: str = ""
    reason: str = "normal"


@dataclass(frozen=True, kw_only=True)
class GroupCreate(Event):
    TYPE: ClassVar[str] = "group.create"
    group_id: str = field(default_factory=lambda: new_id("grp"))
    name: str
    description: str = ""
    created_by: str


@dataclass(frozen=True, kw_only=True)
class GroupDelete(Event):
    TYPE: ClassVar[str] = "group.delete"
    name: str
    deleted_by: str


@dataclass(frozen=True, kw_only=True)
class GroupMemberAdd(Event):
    TYPE: ClassVar[str] = "group.member.add"
    group: str
    member_type: str = "agent"
    member_value: str
    agent_id: str  # who made the change


@dataclass(frozen=True, kw_only=True)
class GroupMemberRemove(Event):
    TYPE: ClassVar[str] = "group.member.remove"
    group: str
    member_type: str = "agent"
    member_value: str
    agent_id: str


@dataclass(frozen=True, kw_only=True)
class MessageRead(Event):
    TYPE: ClassVar[str] = "message.read"
    agent_id: str
    session_id: str = ""
    message_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class MessageUnread(Event):
    TYPE: ClassVar[str] = "message.unread"
    agent_id: str
    session_id: str = ""
    message_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class MessageArchive(Event):
    TYPE: ClassVar[str] = "message.archive"
    agent_id: str
    session_id: str = ""
    message_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class MessageDelivered(Event):
    """The messages are in ``agent_id``'s replica (written by the daemon holding its key)."""

    TYPE: ClassVar[str] = "message.delivered"
    agent_id: str
    session_id: str = ""
    message_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class MessageSurfaced(Event):
    """A hook or tool placed the messages in ``agent_id``'s context (``via`` says which)."""

    TYPE: ClassVar[str] = "message.surfaced"
    agent_id: str
    session_id: str = ""
    message_ids: tuple[str, ...]
    via: str = ""


@dataclass(frozen=True, kw_only=True)
class MessageAcked(Event):
    """``agent_id`` acknowledged the messages (``thrum ack``, the MCP acknowledge tool)."""

    TYPE: ClassVar[str] = "message.acked"
    agent_id: str
    session_id: str = ""
    message_ids: tuple[str, ...]


@dataclass(frozen=True)
class UnknownEvent:
    """An event of a type (or version) this build does not know: kept and passed on."""

    raw: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.raw.get("type", ""))

    @property
    def event_id(self) -> str:
        return str(self.raw.get("event_id", ""))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.raw)

    def to_line(self) -> bytes:
        return encode_line(self.raw)


TYPED = {
    cls.TYPE: cls
    for cls in (
        MessageCreate,
        MessageEdit,
        MessageDelete,
        ThreadCreate,
        AgentRegister,
        AgentUpdate,
        AgentHeartbeat,
        AgentCleanup,
        AgentAdmit,
        AgentRotate,
        AgentRevoke,
        SessionStart,
        SessionEnd,
        GroupCreate,
        GroupDelete,
        GroupMemberAdd,
        GroupMemberRemove,
        MessageRead,
        MessageUnread,
        MessageArchive,
        MessageDelivered,
        MessageSurfaced,
        MessageAcked,
    )
}
assert set(TYPED) == set(NORMALISERS)


def from_dict(d: dict[str, Any]) -> Event | UnknownEvent:
    """A validated dict (as `decode_line` returns) to its typed event."""
    d = normalise(d)
    cls = TYPED.get(d["type"]) if is_known(d) else None
    if cls is None:
        return UnknownEvent(d)
    kwargs = {}
    for f in fields(cls):
        if f.name in d:
            value = d[f.name]
            if f.name == "body":
                value = Body(content=value["content"], format=value["format"], structured=value["structured"])
            elif f.name in ("scopes", "refs"):
                value = tuple(Tag(t["type"], t["value"]) for t in value)
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[f.name] = value
    return cls(**kwargs)

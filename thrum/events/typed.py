"""Typed events: the schema's Structs as the write path builds them.

Each class here is its event type's Struct (`thrum.events.schema`) and adds only what
building one needs: the ids and the time it gets when the caller gives none, and
`Event`'s methods (its line, its stream). Its fields, types and rules are the schema's.
Building one validates it the way the log is read (`validation.struct_of`, raising
`ValidationError`) and keeps the normalised values, so an event equals its decoded self.
`from_dict` turns a decoded dict back into its type; a type or version this build does
not know becomes an `UnknownEvent`, kept and passed on. The fold works on the normalised
dicts directly; these classes are for building events.
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

import msgspec
from msgspec import UNSET

from ..errors import ValidationError
from . import schema
from .checks import fields_of
from .codec import encode_line
from .ids import new_id, new_ulid, now_rfc3339
from .schema import Tag
from .shards import stream_for
from .validation import is_known, normalise, struct_of
from .values import EVENT_VERSION

__all__ = ["TYPED", "Body", "Event", "Tag", "UnknownEvent", "from_dict"]


class Event(schema.Envelope, kw_only=True):
    """What every typed event has besides its type's fields: a new id and the time when the
    caller gives none, its line and its stream. (Each class below is this and its Struct.)"""

    TYPE: ClassVar[str] = ""  # (each class's tag, set below)
    event_id: str = msgspec.field(default_factory=new_ulid)
    timestamp: str = msgspec.field(default_factory=now_rfc3339)

    def __post_init__(self) -> None:
        checked = struct_of(self.to_dict())  # raises ValidationError on any bad field
        if checked is None:  # (a version this build only keeps: it does not write one)
            raise ValidationError(f"v: this build writes version {EVENT_VERSION}", field="v")
        for name in self.__struct_fields__:
            setattr(self, name, getattr(checked, name))

    @property
    def type(self) -> str:
        return self.TYPE

    def to_dict(self) -> dict[str, Any]:
        """The event as its line holds it: optional fields added later left out when empty."""
        d: dict[str, Any] = msgspec.to_builtins(self)
        for name in _omitted(type(self)):
            if name in d and not d[name]:
                del d[name]
        return d

    def to_line(self) -> bytes:
        return encode_line(self.to_dict())

    @property
    def stream(self) -> str:
        return stream_for(self.to_dict())


@cache
def _omitted(cls: type[schema.Envelope]) -> tuple[str, ...]:
    """The fields a line leaves out when empty: those absent by default, and those the schema names."""
    absent = [name for name, f in fields_of(cls).items() if f.default is UNSET]
    return (*absent, *cls.OMIT_WHEN_EMPTY)


def Body(content: str, format: str = "markdown", structured: str = "") -> schema.Body:  # noqa: N802, A002
    """A message body (content first: ``ev.Body("text")``), checked with the event it is built into."""
    body = schema.Body(format=format, content=content)
    body.structured = structured  # (not parsed here: a bad one is the event's ValidationError)
    return body


class MessageCreate(Event, schema.MessageCreate, kw_only=True):
    message_id: str = msgspec.field(default_factory=lambda: new_id("msg"))


class MessageEdit(Event, schema.MessageEdit, kw_only=True):
    pass


class MessageDelete(Event, schema.MessageDelete, kw_only=True):
    pass


class ThreadCreate(Event, schema.ThreadCreate, kw_only=True):
    thread_id: str = msgspec.field(default_factory=lambda: new_id("thr"))


class AgentRegister(Event, schema.AgentRegister, kw_only=True):
    pass


class AgentUpdate(Event, schema.AgentUpdate, kw_only=True):
    pass


class AgentHeartbeat(Event, schema.AgentHeartbeat, kw_only=True):
    pass


class AgentCleanup(Event, schema.AgentCleanup, kw_only=True):
    pass


class AgentAdmit(Event, schema.AgentAdmit, kw_only=True):
    pass


class AgentRotate(Event, schema.AgentRotate, kw_only=True):
    pass


class AgentRevoke(Event, schema.AgentRevoke, kw_only=True):
    pass


class SessionStart(Event, schema.SessionStart, kw_only=True):
    session_id: str = msgspec.field(default_factory=lambda: new_id("ses"))


class SessionEnd(Event, schema.SessionEnd, kw_only=True):
    pass


class GroupCreate(Event, schema.GroupCreate, kw_only=True):
    group_id: str = msgspec.field(default_factory=lambda: new_id("grp"))


class GroupDelete(Event, schema.GroupDelete, kw_only=True):
    pass


class GroupMemberAdd(Event, schema.GroupMemberAdd, kw_only=True):
    pass


class GroupMemberRemove(Event, schema.GroupMemberRemove, kw_only=True):
    pass


class MessageRead(Event, schema.MessageRead, kw_only=True):
    pass


class MessageUnread(Event, schema.MessageUnread, kw_only=True):
    pass


class MessageArchive(Event, schema.MessageArchive, kw_only=True):
    pass


class MessageDelivered(Event, schema.MessageDelivered, kw_only=True):
    pass


class MessageSurfaced(Event, schema.MessageSurfaced, kw_only=True):
    pass


class MessageAcked(Event, schema.MessageAcked, kw_only=True):
    pass


class UnknownEvent(msgspec.Struct, frozen=True):
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


TYPED: dict[str, type[Event]] = {
    str(cls.__struct_config__.tag): cls
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
for _tag, _cls in TYPED.items():
    _cls.TYPE = _tag
assert set(TYPED) == set(schema.SCHEMAS), "every event type has its typed class"


def from_dict(d: dict[str, Any]) -> Event | UnknownEvent:
    """A validated dict (as `decode_line` returns) to its typed event."""
    d = normalise(d)
    cls = TYPED.get(d["type"]) if is_known(d) else None
    if cls is None:
        return UnknownEvent(d)
    event: Event = msgspec.convert(d, cls)
    return event

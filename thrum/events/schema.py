"""The event schema, declared once: one typed msgspec Struct per event type, decoded in C.

A log line is untrusted input, and a rebuild reads a million of them: decoding and
checking each in Python cost ~7 µs a line, most of a rebuild's per-line work. Here
each event type is one declaration (its fields, their types, patterns, lengths and
defaults), which msgspec checks in C while it parses the line (`decode`); the few
rules that span fields (an ``ack_within`` needs ``ack``; a registration's ``name``
is its ``agent_id``; one of ``since`` and ``from_event``) are small Python checks
in ``__post_init__``, after the fields are typed.

Rules:

1. What the schema accepts is exactly what `thrum.events.validation.normalise` accepts,
   and it returns the same normalised dict (known fields only, defaults filled, tag
   and id lists without duplicates). tests/test_events_schema.py holds the two
   against each other: a hypothesis property over generated events and a corpus of
   malformed lines.
2. The schema is strict where the checked path is lenient in ways no writer uses
   (``"scopes": 0`` read as no scopes, a falsy ``structured``): such lines, unknown
   types, future versions and every line the schema refuses go to the checked path
   (`thrum.events.codec.decode_line`), which keeps them or words the precise error.
   So the schema can refuse more, never accept more.
3. ``sig`` is kept as written (the trust check judges it), ``chain`` is checked like
   any field (`thrum.trust.chains`).
"""

from __future__ import annotations

import re
from calendar import isleap
from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from .. import safejson
from .fields import CHAIN_HASH_RE, LOG_ID_RE, MAX_CHAIN_SEQ
from .ids import GROUP_ID_RE, MESSAGE_ID_RE, SESSION_ID_RE, THREAD_ID_RE, ULID_RE
from .names import EVERYONE, NAME_RE, UNUSABLE_NAMES
from .tags import MAX_TAG_VALUE, TAG_TYPE_RE
from .validation import IDEMPOTENCY_KEY_RE
from .values import (
    EVENT_VERSION,
    MAX_ACK_WITHIN,
    MAX_CONTENT_BYTES,
    MAX_IDS,
    MAX_REFS,
    MAX_SUBJECT_CHARS,
    MAX_VIA_CHARS,
)

__all__ = ["SCHEMA_TYPES", "decode"]

# Patterns are the ones the checked path uses (ids, names, tags), checked in `__post_init__`
# rather than as msgspec constraints: a pattern constraint is one Python regex call per
# field (~0.35 µs), and a message has eight. Values that repeat line after line (agent,
# session, thread, tag type) are remembered once they matched (`_Known`); the values
# every line has anew (event id, time, message id) are matched in one call
# (`_STAMPED`). The timestamp pattern is the checked path's (RFC 3339 UTC, 2000–2099,
# `ids.is_valid_timestamp`) with the ranges of its parts spelled out; a day past the
# 28th is checked against its month (`_real_day`).
_TIMESTAMP = (
    r"20[0-9]{2}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(?:\.[0-9]{1,9})?Z"
)
_TIMESTAMP_RE = re.compile(_TIMESTAMP)
_STAMPED = re.compile(f"(?:{ULID_RE.pattern})\x00(?:{_TIMESTAMP})").fullmatch  # event id, timestamp
_STAMPED_MESSAGE = re.compile(
    f"(?:{ULID_RE.pattern})\x00(?:{_TIMESTAMP})\x00(?:{MESSAGE_ID_RE.pattern})"
).fullmatch  # ... and a message id
_MESSAGE_IDS = re.compile(f"(?:{MESSAGE_ID_RE.pattern})(?:\x00(?:{MESSAGE_ID_RE.pattern}))*").fullmatch
_CHAIN_HASH = CHAIN_HASH_RE.fullmatch
_LOG_ID = LOG_ID_RE.fullmatch
_ULID = ULID_RE.fullmatch
_MESSAGE_ID = MESSAGE_ID_RE.fullmatch
_GROUP_ID = GROUP_ID_RE.fullmatch
_KEY = IDEMPOTENCY_KEY_RE.fullmatch


class _Known:
    """A pattern, and the values already seen to match it (at most `LIMIT`): names and
    ids that repeat on every line are matched once."""

    LIMIT = 4096

    def __init__(self, pattern: re.Pattern[str], refused: frozenset[str] = frozenset()):
        self.match = pattern.fullmatch
        self.refused = refused
        self.seen: set[str] = set()

    def __call__(self, value: str) -> bool:
        if value in self.seen:
            return True
        if self.match(value) is None or value in self.refused:
            return False
        if len(self.seen) < self.LIMIT:
            self.seen.add(value)
        return True


_agent = _Known(NAME_RE, UNUSABLE_NAMES)  # fields.agent_field
_name = _Known(NAME_RE)  # a group member's name
_group = _Known(NAME_RE, frozenset({EVERYONE}))  # validation._group_name
_session = _Known(SESSION_ID_RE)
_thread = _Known(THREAD_ID_RE)
_tag_type = _Known(TAG_TYPE_RE)


def _check(ok: bool, field: str) -> None:
    if not ok:
        raise ValueError(f"{field}: invalid value")


Text64 = Annotated[str, Meta(max_length=64)]
Text128 = Annotated[str, Meta(max_length=128)]
Text256 = Annotated[str, Meta(max_length=256)]
Text1024 = Annotated[str, Meta(max_length=1024)]
Required64 = Annotated[str, Meta(min_length=1, max_length=64)]


class Tag(Struct, gc=False):
    """A scope or ref (`thrum.events.tags`)."""

    type: Annotated[str, Meta(min_length=1, max_length=64)]
    value: Annotated[str, Meta(min_length=1, max_length=MAX_TAG_VALUE)]


Tags = Annotated[list[Tag], Meta(max_length=MAX_REFS)]


def _tags(tags: list[Tag] | None, field: str) -> list[Tag]:
    """Tags of known types, without repeats, in their order (`fields.tag_list`)."""
    if not tags:
        return []
    known = _tag_type.seen
    for t in tags:
        if t.type not in known:
            _check(_tag_type(t.type), field)
    if len(tags) == 1:
        return tags
    seen: set[tuple[str, str]] = set()
    out = []
    for t in tags:
        if (t.type, t.value) not in seen:
            seen.add((t.type, t.value))
            out.append(t)
    return out


class Body(Struct, kw_only=True, gc=False):
    """A message body (`fields.body_field`): ``structured`` is JSON text or empty."""

    format: Literal["markdown", "plain", "json", ""] | None = "markdown"
    content: Annotated[str, Meta(max_length=MAX_CONTENT_BYTES)]
    structured: str | None = ""

    def __post_init__(self) -> None:
        if not self.format:
            self.format = "markdown"
        if self.structured is None:
            self.structured = ""
        elif self.structured:
            safejson.loads(self.structured)  # ValueError: not JSON


class Chain(Struct, forbid_unknown_fields=True, gc=False):
    """The signer's place in its chain (`fields.chain_field`, `thrum.trust.chains`): no other keys."""

    seq: Annotated[int, Meta(ge=1, le=MAX_CHAIN_SEQ)]
    prev: str | UnsetType = UNSET
    log: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.seq == 1:
            _check(self.prev is UNSET, "chain")
        else:
            _check(self.prev is not UNSET and _CHAIN_HASH(self.prev) is not None, "chain")
        if self.log is not UNSET:
            _check(_LOG_ID(self.log) is not None, "chain")


class Invite(Struct, forbid_unknown_fields=True, gc=False):
    """The invite a registration redeems (`team_fields.invite_field`): exactly key and sig."""

    key: Required64
    sig: Annotated[str, Meta(min_length=1, max_length=128)]


_THIRTY_DAYS = frozenset({"04", "06", "09", "11"})


def _real_day(ts: str) -> bool:
    """Whether the date of a timestamp that matched `_TIMESTAMP` exists (days past the 28th)."""
    day = ts[8:10]
    if day <= "28":
        return True
    month = ts[5:7]
    if month == "02":
        return day == "29" and isleap(int(ts[0:4]))
    return day <= ("30" if month in _THIRTY_DAYS else "31")


class _Event(Struct, tag_field="type", kw_only=True, gc=False):
    """The envelope every event has: ids, time, version, chain and signature."""

    timestamp: str
    event_id: str
    v: Annotated[int, Meta(ge=1)] = EVENT_VERSION
    # Every leaf ends with ``chain`` and ``sig``: the normalised dict has its keys in
    # `normalise`'s order (type, time, id, v, fields, chain, sig), so that a decoded event
    # encodes again as the line it came from.

    def _envelope(self) -> None:
        if self.v > EVENT_VERSION:
            raise ValueError("a future version: the checked path keeps it as written")
        _check(_STAMPED(f"{self.event_id}\x00{self.timestamp}") is not None, "event_id or timestamp")
        self._common()

    def _common(self) -> None:
        _check(_real_day(self.timestamp), "timestamp")
        signed: Any = self  # (every leaf has them)
        if signed.chain is None:
            signed.chain = UNSET
        if signed.sig is None:
            signed.sig = UNSET

    def __post_init__(self) -> None:
        self._envelope()


def _opt(value: str | None, known: _Known, field: str) -> str:
    """An optional name or id: None and "" are none; anything else must match."""
    if not value:
        return ""
    _check(known(value), field)
    return value


class MessageCreate(_Event, tag="message.create", kw_only=True):
    message_id: str
    thread_id: Annotated[str, Meta(max_length=4096)] | None = ""
    agent_id: str
    session_id: Annotated[str, Meta(max_length=4096)]
    body: Body
    scopes: Tags | None = msgspec.field(default_factory=list)
    refs: Tags | None = msgspec.field(default_factory=list)
    priority: Literal["low", "normal", "high", "critical", ""] | None = "normal"
    authored_by: Text256 | None = ""
    disclosed: Any = False
    subject: Annotated[str, Meta(max_length=MAX_SUBJECT_CHARS)] | None = ""
    idempotency_key: Text128 | None | UnsetType = UNSET
    ack: bool | None | UnsetType = UNSET
    ack_within: Annotated[int, Meta(ge=1, le=MAX_ACK_WITHIN)] | None | UnsetType = UNSET
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        # The rules of `_envelope` and `_opt`, spelled out: a rebuild runs this a million times.
        ts = self.timestamp
        if (
            self.v > EVENT_VERSION
            or _STAMPED_MESSAGE(f"{self.event_id}\x00{ts}\x00{self.message_id}") is None
            or (ts[8:10] > "28" and not _real_day(ts))
            or not (self.agent_id in _agent.seen or _agent(self.agent_id))
            or not (self.session_id in _session.seen or _session(self.session_id))
        ):
            raise ValueError("a future version, or an id, time, agent or session the checked path words")
        if self.chain is None:
            self.chain = UNSET
        if self.sig is None:
            self.sig = UNSET
        thread = self.thread_id
        if not thread:
            self.thread_id = ""
        elif not (thread in _thread.seen or _thread(thread)):
            raise ValueError("thread_id: invalid value")
        self.scopes = _tags(self.scopes, "scopes") if self.scopes else []
        self.refs = _tags(self.refs, "refs") if self.refs else []
        if not self.priority:
            self.priority = "normal"
        if self.authored_by is None:
            self.authored_by = ""
        if self.disclosed is not True and self.disclosed is not False:
            self.disclosed = bool(self.disclosed)
        if self.subject is None:
            self.subject = ""
        if not self.idempotency_key:
            self.idempotency_key = UNSET
        else:
            _check(_KEY(self.idempotency_key) is not None, "idempotency_key")
        ack, within = self.ack, self.ack_within
        if ack is UNSET and within is UNSET:
            return
        if within is not UNSET and within is not None and not ack:
            raise ValueError("ack_within: needs ack: true")
        if not ack:
            self.ack = self.ack_within = UNSET
        elif within is None:
            self.ack_within = UNSET


class MessageEdit(_Event, tag="message.edit", kw_only=True):
    message_id: str
    agent_id: str
    session_id: Annotated[str, Meta(max_length=4096)] | None = ""
    body: Body
    idempotency_key: Text128 | None | UnsetType = UNSET
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_MESSAGE_ID(self.message_id) is not None, "message_id")
        _check(_agent(self.agent_id), "agent_id")
        self.session_id = _opt(self.session_id, _session, "session_id")
        if not self.idempotency_key:
            self.idempotency_key = UNSET
        else:
            _check(_KEY(self.idempotency_key) is not None, "idempotency_key")


class MessageDelete(_Event, tag="message.delete", kw_only=True):
    message_id: str
    agent_id: str
    session_id: Annotated[str, Meta(max_length=4096)] | None = ""
    reason: Text1024 | None = ""
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_MESSAGE_ID(self.message_id) is not None, "message_id")
        _check(_agent(self.agent_id), "agent_id")
        self.session_id = _opt(self.session_id, _session, "session_id")
        if self.reason is None:
            self.reason = ""


class ThreadCreate(_Event, tag="thread.create", kw_only=True):
    thread_id: Annotated[str, Meta(min_length=1, max_length=4096)]
    title: Text1024 | None = ""
    created_by: str
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_thread(self.thread_id), "thread_id")
        _check(_agent(self.created_by), "created_by")
        if self.title is None:
            self.title = ""


class AgentRegister(_Event, tag="agent.register", kw_only=True):
    agent_id: str
    kind: Literal["agent", "user", ""] | None = "agent"
    name: Text64 | None = ""
    role: Annotated[str, Meta(min_length=1, max_length=4096)]
    module: Text256 | None = ""
    worktree: Text1024 | None = ""
    display: Text256 | None = ""
    public_key: Text64 | None = ""
    invite: Invite | None | UnsetType = UNSET
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_agent(self.agent_id), "agent_id")
        _check(_agent(self.role), "role")  # a role is a name no agent may take either
        if self.name and self.name != self.agent_id:
            raise ValueError("name: must equal agent_id")
        if self.role == self.agent_id:
            raise ValueError("role: must differ from the agent's name")
        self.name = self.agent_id
        if not self.kind:
            self.kind = "agent"
        if self.module is None:
            self.module = ""
        if self.worktree is None:
            self.worktree = ""
        if self.display is None:
            self.display = ""
        if self.public_key is None:
            self.public_key = ""
        if self.invite is None:
            self.invite = UNSET


class AgentUpdate(_Event, tag="agent.update", kw_only=True):
    agent_id: str
    work_contexts: list[dict[str, Any]] | None = msgspec.field(default_factory=list)
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_agent(self.agent_id), "agent_id")
        if self.work_contexts is None:
            self.work_contexts = []


class AgentHeartbeat(_Event, tag="agent.heartbeat", kw_only=True):
    agent_id: str
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_agent(self.agent_id), "agent_id")


class AgentCleanup(_Event, tag="agent.cleanup", kw_only=True):
    agent_id: str
    reason: Text1024 | None = ""
    method: Literal["manual", "automated", "ui", ""] | None = "manual"
    by: str | None = ""  # who removed the agent (its signer); none: itself
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_agent(self.agent_id), "agent_id")
        self.by = _opt(self.by, _agent, "by")
        if self.reason is None:
            self.reason = ""
        if not self.method:
            self.method = "manual"


class SessionStart(_Event, tag="agent.session.start", kw_only=True):
    session_id: Annotated[str, Meta(max_length=4096)]
    agent_id: str
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_session(self.session_id), "session_id")
        _check(_agent(self.agent_id), "agent_id")


class SessionEnd(_Event, tag="agent.session.end", kw_only=True):
    session_id: Annotated[str, Meta(max_length=4096)]
    agent_id: str | None = ""
    reason: Literal["normal", "crash", ""] | None = "normal"
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_session(self.session_id), "session_id")
        self.agent_id = _opt(self.agent_id, _agent, "agent_id")
        if not self.reason:
            self.reason = "normal"


class AgentAdmit(_Event, tag="agent.admit", kw_only=True):
    agent_id: str
    by: str
    public_key: Text64 | None | UnsetType = UNSET
    invite: Text64 | None | UnsetType = UNSET
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_agent(self.agent_id), "agent_id")
        _check(_agent(self.by), "by")
        if not self.public_key:
            self.public_key = UNSET
        if not self.invite:
            self.invite = UNSET
        if (self.public_key is UNSET) == (self.invite is UNSET):
            raise ValueError("public_key: an admission names exactly one of public_key and invite")


class AgentRotate(_Event, tag="agent.rotate", kw_only=True):
    agent_id: str
    public_key: Required64
    old_key: Required64
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_agent(self.agent_id), "agent_id")


class AgentRevoke(_Event, tag="agent.revoke", kw_only=True):
    agent_id: str
    by: str
    public_key: Required64
    reason: Text1024 | None = ""
    since: str | None | UnsetType = UNSET
    from_event: str | None | UnsetType = UNSET
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_agent(self.agent_id), "agent_id")
        _check(_agent(self.by), "by")
        if self.reason is None:
            self.reason = ""
        if self.since is None:  # null is absent (team_fields.n_agent_revoke)
            self.since = UNSET
        if self.from_event is None:
            self.from_event = UNSET
        if (self.since is UNSET) == (self.from_event is UNSET):
            raise ValueError("since: a revocation names exactly one of since and from_event")
        if self.since is not UNSET:
            _check(_TIMESTAMP_RE.fullmatch(self.since) is not None and _real_day(self.since), "since")
        else:
            _check(_ULID(self.from_event) is not None, "from_event")  # type: ignore[arg-type]


class GroupCreate(_Event, tag="group.create", kw_only=True):
    group_id: Annotated[str, Meta(max_length=4096)]
    name: str
    description: Text1024 | None = ""
    created_by: str
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_GROUP_ID(self.group_id) is not None, "group_id")
        _check(_group(self.name), "name")
        _check(_agent(self.created_by), "created_by")
        if self.description is None:
            self.description = ""


class GroupDelete(_Event, tag="group.delete", kw_only=True):
    name: str
    deleted_by: str
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_group(self.name), "name")
        _check(_agent(self.deleted_by), "deleted_by")


class _GroupMember(_Event, kw_only=True):
    group: str
    member_type: Literal["agent", "role", ""] | None = "agent"
    member_value: str
    agent_id: str
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_group(self.group), "group")
        _check(_name(self.member_value), "member_value")
        _check(_agent(self.agent_id), "agent_id")
        if not self.member_type:
            self.member_type = "agent"


class GroupMemberAdd(_GroupMember, tag="group.member.add", kw_only=True):
    pass


class GroupMemberRemove(_GroupMember, tag="group.member.remove", kw_only=True):
    pass


class _Receipt(_Event, kw_only=True):
    agent_id: str
    session_id: Annotated[str, Meta(max_length=4096)] | None = ""
    message_ids: Annotated[list[str], Meta(min_length=1, max_length=MAX_IDS)]
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        self._envelope()
        _check(_agent(self.agent_id), "agent_id")
        self.session_id = _opt(self.session_id, _session, "session_id")
        ids = self.message_ids
        _check(_MESSAGE_IDS("\x00".join(ids)) is not None, "message_ids")  # one call for up to 10,000
        if len(ids) > 1:
            self.message_ids = list(dict.fromkeys(ids))


class MessageRead(_Receipt, tag="message.read", kw_only=True):
    pass


class MessageUnread(_Receipt, tag="message.unread", kw_only=True):
    pass


class MessageArchive(_Receipt, tag="message.archive", kw_only=True):
    pass


class MessageDelivered(_Receipt, tag="message.delivered", kw_only=True):
    pass


class MessageAcked(_Receipt, tag="message.acked", kw_only=True):
    pass


class MessageSurfaced(_Event, tag="message.surfaced", kw_only=True):
    agent_id: str
    session_id: Annotated[str, Meta(max_length=4096)] | None = ""
    message_ids: Annotated[list[str], Meta(min_length=1, max_length=MAX_IDS)]
    via: Annotated[str, Meta(max_length=MAX_VIA_CHARS)] | None | UnsetType = UNSET
    chain: Chain | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    def __post_init__(self) -> None:
        _Receipt.__post_init__(self)  # type: ignore[arg-type]
        if not self.via:
            self.via = UNSET


SCHEMA_TYPES: tuple[type[_Event], ...] = (
    MessageCreate,
    MessageEdit,
    MessageDelete,
    ThreadCreate,
    AgentRegister,
    AgentUpdate,
    AgentHeartbeat,
    AgentCleanup,
    SessionStart,
    SessionEnd,
    AgentAdmit,
    AgentRotate,
    AgentRevoke,
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

_decoder = msgspec.json.Decoder(Union[SCHEMA_TYPES])
_to_builtins = msgspec.to_builtins
Refused = (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError)


def decode(line: bytes | str) -> dict[str, Any]:
    """The normalised event of one line, as `validation.normalise` returns it.

    Raises:
        msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError (`Refused`):
            the schema does not take the line (the checked path decides what it is).
    """
    out: dict[str, Any] = _to_builtins(_decoder.decode(line))
    return out

"""The event schema, declared once: one typed msgspec Struct per event type.

Each event type is one declaration here: its fields, their types, lengths, choices and
defaults, and how a bad value of each is worded (`thrum.events.checks.words`). Everything
else is derived from it: decoding a log line (`decode`, in C while msgspec parses it),
validating an event given as a dict (`thrum.events.validation.normalise`, the general
path, with the same one-line errors), the typed events the write path builds
(`thrum.events.typed`, subclasses of these), and the list of event types (`EVENT_TYPES`).

Rules:

1. What msgspec cannot say is a small Python check in the Struct's ``__post_init__``,
   after the fields are typed: patterns (matched here, not as msgspec constraints: see
   `thrum.events.checks`) and the rules that span fields (an ``ack_within`` needs
   ``ack``; a registration's ``name`` is its ``agent_id``; one of ``since`` and
   ``from_event``). They raise ``ValueError`` in the field's declared words (`fail`).
2. A decoded event is normalised: known fields only, defaults filled (``None`` and ``""``
   of an optional field are its default), tag and id lists without repeats, optional
   fields added later (``idempotency_key``, ``ack``, ``via``...) absent when empty, and
   its keys in declaration order: type, time, id, version, fields, chain, signature.
3. The hand-written checks this replaced read a falsy value of a few fields as their
   default (``"scopes": 0`` as no scopes); those fields say so (``FALSY_IS_DEFAULT``).
   Only the general path reads them so: `decode` refuses such a line and
   `thrum.events.codec.decode_line` hands it to the general path, as it does unknown
   types and future versions (kept as written). tests/test_events_schema.py holds the
   two paths to one answer; tests/test_events_corpus.py holds both to the answers the
   hand-written checks gave.
4. ``sig`` is kept as written (the trust check judges it, over the line as written:
   docs/design/trust.md); ``chain`` is checked like any field (`thrum.trust.chains`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeAlias, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from .. import safejson
from .checks import (
    CHAIN_HASH_RE,
    LOG_ID_RE,
    MAX_CHAIN_SEQ,
    TIMESTAMP,
    Known,
    fail,
    fields_of,
    is_timestamp,
    pattern,
    real_day,
    say,
    words,
)
from .ids import GROUP_ID_RE, IDEMPOTENCY_KEY_RE, MESSAGE_ID_RE, SESSION_ID_RE, THREAD_ID_RE, ULID_RE
from .names import EVERYONE, NAME_RE, UNUSABLE_NAMES
from .tags import MAX_TAG_VALUE, TAG_TYPE_RE
from .values import (
    AGENT_KINDS,
    CLEANUP_METHODS,
    END_REASONS,
    EVENT_VERSION,
    FORMATS,
    MAX_ACK_WITHIN,
    MAX_CONTENT_BYTES,
    MAX_IDS,
    MAX_REFS,
    MAX_SUBJECT_CHARS,
    MAX_VIA_CHARS,
    MEMBER_TYPES,
    PRIORITIES,
)

__all__ = ["EVENT_TYPES", "SCHEMAS", "SCHEMA_TYPES", "Envelope", "Refused", "decode"]

# --------------------------------------------------------------------------- matchers
# The values every line has anew (event id, time, message id) are matched in one call.
_STAMPED = re.compile(f"(?:{ULID_RE.pattern})\x00(?:{TIMESTAMP})").fullmatch
_STAMPED_MESSAGE = re.compile(f"(?:{ULID_RE.pattern})\x00(?:{TIMESTAMP})\x00(?:{MESSAGE_ID_RE.pattern})").fullmatch
_MESSAGE_IDS = re.compile(f"(?:{MESSAGE_ID_RE.pattern})(?:\x00(?:{MESSAGE_ID_RE.pattern}))*").fullmatch
_ULID = ULID_RE.fullmatch
_MESSAGE_ID = MESSAGE_ID_RE.fullmatch
_GROUP_ID = GROUP_ID_RE.fullmatch
_KEY = IDEMPOTENCY_KEY_RE.fullmatch
_CHAIN_HASH = CHAIN_HASH_RE.fullmatch
_LOG_ID = LOG_ID_RE.fullmatch
# Names and ids that repeat on every line are matched once (`Known`).
_agent = Known(NAME_RE, UNUSABLE_NAMES)  # never a reserved name or "everyone", whoever wrote the line
_role = Known(NAME_RE, UNUSABLE_NAMES)  # a role is a name no agent may take either
_name = Known(NAME_RE)  # a group member's name
_group = Known(NAME_RE, frozenset({EVERYONE}))
_session = Known(SESSION_ID_RE)
_thread = Known(THREAD_ID_RE)
_tag_type = Known(TAG_TYPE_RE)

# --------------------------------------------------------------------------- field types
if TYPE_CHECKING:  # a caller passes the str it took from a user; the schema checks it is a choice
    Format: TypeAlias = str
    Priority: TypeAlias = str
    AgentKind: TypeAlias = str
    CleanupMethod: TypeAlias = str
    EndReason: TypeAlias = str
    MemberType: TypeAlias = str
else:  # the choices of `values`, and "" (read as the default)
    Format = Literal[(*FORMATS, "")]
    Priority = Literal[(*PRIORITIES, "")]
    AgentKind = Literal[(*AGENT_KINDS, "")]
    CleanupMethod = Literal[(*CLEANUP_METHODS, "")]
    EndReason = Literal[(*END_REASONS, "")]
    MemberType = Literal[(*MEMBER_TYPES, "")]
# Strings are at most 4096 characters unless said; ids' patterns are matched after decoding.
Id = Annotated[str, Meta(min_length=1, max_length=4096)]  # required: an event, message, session... id
OptionalId = Annotated[str, Meta(max_length=4096)]  # None or "": none
Text64 = Annotated[str, Meta(max_length=64)]
Text128 = Annotated[str, Meta(max_length=128)]
Text256 = Annotated[str, Meta(max_length=256)]
Text1024 = Annotated[str, Meta(max_length=1024)]
PublicKey = Annotated[str, Meta(min_length=1, max_length=64)]
Agent = Annotated[
    str, Meta(extra=words(all="invalid agent id {v80}", reserved="{value!r} is reserved: no agent may be called that"))
]
Role = Annotated[
    str, Meta(min_length=1, max_length=4096, extra=words(reserved="{value!r} is reserved: no role may be called that"))
]
GroupName = Annotated[
    str,
    Meta(
        extra=words(
            all="invalid group name {v80}: use lowercase letters, digits and _", reserved="'everyone' is built in"
        )
    ),
]
MemberName = Annotated[str, Meta(extra=words(all="invalid {event[member_type]} name {v80}"))]
IdList = Annotated[
    Sequence[str],
    Meta(
        min_length=1,
        max_length=MAX_IDS,
        extra=words(
            missing="must be a non-empty list of message ids",
            type="must be a non-empty list of message ids",
            empty="must be a non-empty list of message ids",
            entry="invalid message id {v80}",
        ),
    ),
]


class Tag(Struct, frozen=True, gc=False):
    """A scope or ref: ``{"type": ..., "value": ...}`` (`thrum.events.tags`)."""

    type: Annotated[str, Meta(min_length=1, max_length=64, extra=words(all="invalid type {v40}"))]
    value: Annotated[
        str, Meta(min_length=1, max_length=MAX_TAG_VALUE, extra=words(all="invalid value for type {parent[type]!r}"))
    ]


Tags = Annotated[
    Sequence[Tag],
    Meta(
        max_length=MAX_REFS,
        extra=words(type="must be a list of {{type, value}} objects", entry="entries must be {{type, value}} objects"),
    ),
]


def _tags(tags: Sequence[Tag], field: str) -> Sequence[Tag]:
    """Tags of known types, without repeats, in their order."""
    known = _tag_type.seen
    for t in tags:
        if t.type not in known and not _tag_type(t.type):
            raise ValueError(say(fields_of(Tag)["type"], "invalid", t.type, name=field))
    if len(tags) == 1:
        return tags if type(tags) is list else list(tags)
    seen: set[tuple[str, str]] = set()
    out = []
    for t in tags:
        if (t.type, t.value) not in seen:
            seen.add((t.type, t.value))
            out.append(t)
    return out


class Body(Struct, kw_only=True, gc=False):
    """A message body: ``structured`` is JSON text or empty."""

    format: Annotated[Format, Meta(extra=words(name="format"))] | None = "markdown"
    content: Annotated[
        str,
        Meta(
            max_length=MAX_CONTENT_BYTES, extra=words(name="body.content", all="must be a string", long="is too large")
        ),
    ]
    structured: Annotated[str, Meta(extra=words(name="body.structured", all="must be a JSON string"))] | None = ""

    FALSY_IS_DEFAULT: ClassVar[tuple[str, ...]] = ("structured",)

    def __post_init__(self) -> None:
        if not self.format:
            self.format = "markdown"
        if self.structured is None:
            self.structured = ""
        elif self.structured:
            try:
                safejson.loads(self.structured)
            except ValueError as exc:
                raise ValueError(f"body.structured: is not valid JSON ({str(exc)[:80]})") from None


BodyField = Annotated[Body, Meta(extra=words(all="must be an object with format and content"))]


class Chain(Struct, forbid_unknown_fields=True, gc=False):
    """The signer's place in its chain (`thrum.trust.chains`): its sequence number (from 1),
    the hash of its previous event (from the second on) and the log it was written for."""

    seq: Annotated[
        int, Meta(ge=1, le=MAX_CHAIN_SEQ, extra=words(name="chain", all="seq must be a whole number from 1"))
    ]
    prev: (
        Annotated[
            str,
            Meta(extra=words(name="chain", all="prev must be the 22-character hash of the signer's previous event")),
        ]
        | UnsetType
    ) = UNSET
    log: (
        Annotated[str, Meta(extra=words(name="chain", all="log must be a log id (letters, digits, _ - . :)"))]
        | UnsetType
    ) = UNSET

    def __post_init__(self) -> None:
        if self.seq == 1:
            if self.prev is not UNSET:
                raise ValueError("chain: the first event of a chain has no prev")
        elif self.prev is UNSET or not _CHAIN_HASH(self.prev):
            fail(self, "prev", self.prev)
        if self.log is not UNSET:
            pattern(self, "log", self.log, _LOG_ID)


ChainField = Annotated[Chain, Meta(extra=words(type="must be an object", unknown="may hold only seq, prev and log"))]


class Invite(Struct, forbid_unknown_fields=True, gc=False):
    """The invite a registration redeems (docs/design/trust.md, "Admission"): exactly key and sig."""

    key: Annotated[str, Meta(min_length=1, max_length=64, extra=words(name="invite.key"))]
    sig: Annotated[str, Meta(min_length=1, max_length=128, extra=words(name="invite.sig"))]


InviteField = Annotated[
    Invite,
    Meta(extra=words(type="must be an object with key and sig", unknown="must be an object with key and sig")),
]


class Envelope(Struct, tag_field="type", kw_only=True, gc=False):
    """The envelope every event has: time, id, version; every leaf ends with chain and sig."""

    timestamp: Annotated[str, Meta(extra=words(all="must be an RFC 3339 UTC time between 2000 and 2099 (got {v40})"))]
    event_id: Annotated[str, Meta(extra=words(all="must be a ULID (got {v40})"))]
    v: Annotated[int, Meta(ge=1, extra=words(all="must be a positive integer"))] = EVENT_VERSION

    # Where the event lives and who wrote it (`thrum.events.shards`): the kind of its stream
    # (``events``, or ``messages``/``receipts`` of the agent its OWNER field names) and the
    # fields naming its author, who must have signed it (the first that is set).
    STREAM: ClassVar[str] = "events"
    OWNER: ClassVar[str] = "agent_id"
    AUTHOR: ClassVar[tuple[str, ...]] = ("agent_id",)
    # Fields whose falsy value (0, false, "", [], {}) the general path reads as their default.
    FALSY_IS_DEFAULT: ClassVar[tuple[str, ...]] = ()
    # Fields a written line leaves out when empty, besides those that default to absent.
    OMIT_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ()

    def _envelope(self) -> None:
        if self.v > EVENT_VERSION:
            raise ValueError("v: a future version (kept as written)")
        if _STAMPED(f"{self.event_id}\x00{self.timestamp}") is None or not real_day(self.timestamp):
            pattern(self, "event_id", self.event_id, _ULID)
            if not is_timestamp(self.timestamp):
                fail(self, "timestamp", self.timestamp)
        signed: Any = self  # (every leaf has them)
        if signed.chain is None:
            signed.chain = UNSET
        if signed.sig is None:
            signed.sig = UNSET

    def __post_init__(self) -> None:
        self._envelope()


def _opt(owner: Envelope, name: str, value: str | None, match: Known | Any) -> str:
    """An optional name or id: None and "" are none; anything else must match."""
    if not value:
        return ""
    pattern(owner, name, value, match)
    return value


def _key(owner: Envelope, key: str | None | UnsetType) -> str | UnsetType:
    """An idempotency key: absent when empty."""
    if not key:
        return UNSET
    pattern(owner, "idempotency_key", key, _KEY)
    return key


class MessageCreate(Envelope, tag="message.create", kw_only=True):
    STREAM: ClassVar[str] = "messages"

    message_id: Id
    thread_id: OptionalId | None = ""
    agent_id: Agent
    session_id: Id
    body: BodyField
    scopes: Tags | None = ()
    refs: Tags | None = ()
    priority: Priority | None = "normal"
    authored_by: Text256 | None = ""
    disclosed: Any = False  # read as true or false, whatever JSON it is
    subject: Annotated[str, Meta(max_length=MAX_SUBJECT_CHARS)] | None = ""
    idempotency_key: Text128 | None | UnsetType = UNSET
    ack: Annotated[bool, Meta(extra=words(all="must be true or false"))] | None | UnsetType = UNSET
    ack_within: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=MAX_ACK_WITHIN,
                extra=words(all=f"must be a whole number of seconds from 1 to {MAX_ACK_WITHIN}"),
            ),
        ]
        | None
        | UnsetType
    ) = UNSET  # seconds after the timestamp an ack is due
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET  # kept as written: thrum.trust judges it

    FALSY_IS_DEFAULT: ClassVar[tuple[str, ...]] = ("scopes", "refs")
    OMIT_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("subject",)  # lines of messages without one stay as they were

    def __post_init__(self) -> None:
        # `_envelope` and the patterns in one condition (a rebuild runs this a million times);
        # when it fails, `_precisely` finds the field and words it.
        ts = self.timestamp
        if (
            self.v > EVENT_VERSION
            or _STAMPED_MESSAGE(f"{self.event_id}\x00{ts}\x00{self.message_id}") is None
            or (ts[8:10] > "28" and not real_day(ts))
            or not (self.agent_id in _agent.seen or _agent(self.agent_id))
            or not (self.session_id in _session.seen or _session(self.session_id))
        ):
            self._precisely()
        if self.chain is None:
            self.chain = UNSET
        if self.sig is None:
            self.sig = UNSET
        thread = self.thread_id
        if not thread:
            self.thread_id = ""
        elif not (thread in _thread.seen or _thread(thread)):
            fail(self, "thread_id", thread)
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
        self.idempotency_key = _key(self, self.idempotency_key) if self.idempotency_key else UNSET
        ack, within = self.ack, self.ack_within
        if ack is UNSET and within is UNSET:
            return
        if within is not UNSET and within is not None and not ack:
            raise ValueError("ack_within: needs ack: true")
        if not ack:
            self.ack = self.ack_within = UNSET
        elif within is None:
            self.ack_within = UNSET

    def _precisely(self) -> None:
        self._envelope()
        pattern(self, "message_id", self.message_id, _MESSAGE_ID)
        pattern(self, "agent_id", self.agent_id, _agent)
        pattern(self, "session_id", self.session_id, _session)


class MessageEdit(Envelope, tag="message.edit", kw_only=True):
    STREAM: ClassVar[str] = "messages"

    message_id: Id
    agent_id: Agent
    session_id: OptionalId | None = ""
    body: BodyField
    idempotency_key: Text128 | None | UnsetType = UNSET
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "message_id", self.message_id, _MESSAGE_ID)
        pattern(self, "agent_id", self.agent_id, _agent)
        self.session_id = _opt(self, "session_id", self.session_id, _session)
        self.idempotency_key = _key(self, self.idempotency_key)


class MessageDelete(Envelope, tag="message.delete", kw_only=True):
    STREAM: ClassVar[str] = "messages"

    message_id: Id
    agent_id: Agent
    session_id: OptionalId | None = ""
    reason: Text1024 | None = ""
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "message_id", self.message_id, _MESSAGE_ID)
        pattern(self, "agent_id", self.agent_id, _agent)
        self.session_id = _opt(self, "session_id", self.session_id, _session)
        if self.reason is None:
            self.reason = ""


class ThreadCreate(Envelope, tag="thread.create", kw_only=True):
    STREAM: ClassVar[str] = "messages"
    OWNER: ClassVar[str] = "created_by"
    AUTHOR: ClassVar[tuple[str, ...]] = ("created_by",)

    thread_id: Id
    title: Text1024 | None = ""
    created_by: Agent
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "thread_id", self.thread_id, _thread)
        pattern(self, "created_by", self.created_by, _agent)
        if self.title is None:
            self.title = ""


class AgentRegister(Envelope, tag="agent.register", kw_only=True):
    agent_id: Agent
    kind: AgentKind | None = "agent"
    name: Text64 | None = ""  # the agent id (filled in when absent)
    role: Role
    module: Text256 | None = ""
    worktree: Text1024 | None = ""
    display: Text256 | None = ""
    public_key: Text64 | None = ""  # base64 Ed25519 key the event is signed with (thrum.trust)
    invite: InviteField | None | UnsetType = UNSET
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "agent_id", self.agent_id, _agent)
        if self.name and self.name != self.agent_id:
            raise ValueError("name: must equal agent_id")
        pattern(self, "role", self.role, _role)
        if self.role == self.agent_id:  # @name would mean the agent and its role at once
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


class AgentUpdate(Envelope, tag="agent.update", kw_only=True):
    STREAM: ClassVar[str] = "messages"

    agent_id: Agent
    work_contexts: Annotated[Sequence[dict[str, Any]], Meta(extra=words(all="must be a list of objects"))] | None = ()
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    FALSY_IS_DEFAULT: ClassVar[tuple[str, ...]] = ("work_contexts",)

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "agent_id", self.agent_id, _agent)
        if not self.work_contexts:
            self.work_contexts = []
        elif type(self.work_contexts) is not list:
            self.work_contexts = list(self.work_contexts)


class AgentHeartbeat(Envelope, tag="agent.heartbeat", kw_only=True):
    """``agent_id`` was around (thrum.presence): written by the daemon holding its key,
    at most once per ``presence_interval``, only while it writes nothing else."""

    STREAM: ClassVar[str] = "receipts"  # with its agent's marks

    agent_id: Agent
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "agent_id", self.agent_id, _agent)


class AgentCleanup(Envelope, tag="agent.cleanup", kw_only=True):
    AUTHOR: ClassVar[tuple[str, ...]] = ("by", "agent_id")  # an admin, or the agent itself

    agent_id: Agent
    reason: Text1024 | None = ""
    method: CleanupMethod | None = "manual"
    by: Agent | None = ""  # the agent who removed ``agent_id`` (it signs the event); none: itself
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    FALSY_IS_DEFAULT: ClassVar[tuple[str, ...]] = ("by",)

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "agent_id", self.agent_id, _agent)
        self.by = _opt(self, "by", self.by, _agent)
        if self.reason is None:
            self.reason = ""
        if not self.method:
            self.method = "manual"


class SessionStart(Envelope, tag="agent.session.start", kw_only=True):
    session_id: Id
    agent_id: Agent
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "session_id", self.session_id, _session)
        pattern(self, "agent_id", self.agent_id, _agent)


class SessionEnd(Envelope, tag="agent.session.end", kw_only=True):
    session_id: Id
    agent_id: Agent | None = ""
    reason: EndReason | None = "normal"
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    FALSY_IS_DEFAULT: ClassVar[tuple[str, ...]] = ("agent_id",)

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "session_id", self.session_id, _session)
        self.agent_id = _opt(self, "agent_id", self.agent_id, _agent)
        if not self.reason:
            self.reason = "normal"


class AgentAdmit(Envelope, tag="agent.admit", kw_only=True):
    """An admin admits ``agent_id`` with a key, or with an invite key its redeemer proves."""

    AUTHOR: ClassVar[tuple[str, ...]] = ("by",)

    agent_id: Agent
    by: Agent
    public_key: Text64 | None | UnsetType = UNSET
    invite: Text64 | None | UnsetType = UNSET
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "agent_id", self.agent_id, _agent)
        pattern(self, "by", self.by, _agent)
        if not self.public_key:
            self.public_key = UNSET
        if not self.invite:
            self.invite = UNSET
        if (self.public_key is UNSET) == (self.invite is UNSET):
            raise ValueError("public_key: an admission names exactly one of public_key and invite")


class AgentRotate(Envelope, tag="agent.rotate", kw_only=True):
    """``agent_id`` moves from ``old_key`` to ``public_key`` (signed with the old key)."""

    agent_id: Agent
    public_key: PublicKey
    old_key: PublicKey
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "agent_id", self.agent_id, _agent)


class AgentRevoke(Envelope, tag="agent.revoke", kw_only=True):
    """Lines of ``agent_id`` signed with ``public_key`` from a point on no longer count."""

    AUTHOR: ClassVar[tuple[str, ...]] = ("by",)

    agent_id: Agent
    by: Agent
    public_key: PublicKey
    reason: Text1024 | None = ""
    since: Annotated[str, Meta(extra=words(all="must be an RFC 3339 UTC time"))] | None | UnsetType = UNSET
    from_event: Annotated[str, Meta(extra=words(all="must be an event id"))] | None | UnsetType = UNSET
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "agent_id", self.agent_id, _agent)
        pattern(self, "by", self.by, _agent)
        if self.reason is None:
            self.reason = ""
        if self.since is None:  # null is absent
            self.since = UNSET
        if self.from_event is None:
            self.from_event = UNSET
        if (self.since is UNSET) == (self.from_event is UNSET):
            raise ValueError("since: a revocation names exactly one of since and from_event")
        if self.since is not UNSET:
            if not is_timestamp(self.since):
                fail(self, "since", self.since)
        elif not _ULID(str(self.from_event)):
            fail(self, "from_event", self.from_event)


class GroupCreate(Envelope, tag="group.create", kw_only=True):
    AUTHOR: ClassVar[tuple[str, ...]] = ("created_by",)

    group_id: Id
    name: GroupName
    description: Text1024 | None = ""
    created_by: Agent
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "group_id", self.group_id, _GROUP_ID)
        pattern(self, "name", self.name, _group)
        pattern(self, "created_by", self.created_by, _agent)
        if self.description is None:
            self.description = ""


class GroupDelete(Envelope, tag="group.delete", kw_only=True):
    AUTHOR: ClassVar[tuple[str, ...]] = ("deleted_by",)

    name: GroupName
    deleted_by: Agent
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "name", self.name, _group)
        pattern(self, "deleted_by", self.deleted_by, _agent)


class _GroupMember(Envelope, kw_only=True):
    group: GroupName
    member_type: MemberType | None = "agent"
    member_value: MemberName
    agent_id: Agent  # who made the change
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        if not self.member_type:
            self.member_type = "agent"
        pattern(self, "member_value", self.member_value, _name)
        pattern(self, "group", self.group, _group)
        pattern(self, "agent_id", self.agent_id, _agent)


class GroupMemberAdd(_GroupMember, tag="group.member.add", kw_only=True):
    pass


class GroupMemberRemove(_GroupMember, tag="group.member.remove", kw_only=True):
    pass


class _Receipt(Envelope, kw_only=True):
    STREAM: ClassVar[str] = "receipts"  # with its agent's marks

    agent_id: Agent
    session_id: OptionalId | None = ""
    message_ids: IdList
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        self._envelope()
        pattern(self, "agent_id", self.agent_id, _agent)
        self.session_id = _opt(self, "session_id", self.session_id, _session)
        ids = self.message_ids
        if _MESSAGE_IDS("\x00".join(ids)) is None:  # one call for up to 10,000
            for item in ids:
                if not _MESSAGE_ID(item):
                    fail(self, "message_ids", item, "entry")
        if len(ids) > 1:
            self.message_ids = list(dict.fromkeys(ids))
        elif type(ids) is not list:
            self.message_ids = list(ids)


class MessageRead(_Receipt, tag="message.read", kw_only=True):
    pass


class MessageUnread(_Receipt, tag="message.unread", kw_only=True):
    pass


class MessageArchive(_Receipt, tag="message.archive", kw_only=True):
    pass


class MessageDelivered(_Receipt, tag="message.delivered", kw_only=True):
    """The messages are in ``agent_id``'s replica (written by the daemon holding its key)."""


class MessageAcked(_Receipt, tag="message.acked", kw_only=True):
    """``agent_id`` acknowledged the messages (``thrum ack``, the MCP acknowledge tool)."""


class MessageSurfaced(Envelope, tag="message.surfaced", kw_only=True):
    """A hook or tool placed the messages in ``agent_id``'s context (``via`` says which)."""

    STREAM: ClassVar[str] = "receipts"  # with its agent's marks

    agent_id: Agent
    session_id: OptionalId | None = ""
    message_ids: IdList
    via: Annotated[str, Meta(max_length=MAX_VIA_CHARS)] | None | UnsetType = UNSET
    chain: ChainField | None | UnsetType = UNSET
    sig: Any = UNSET

    def __post_init__(self) -> None:
        _Receipt.__post_init__(self)  # type: ignore[arg-type]
        if not self.via:
            self.via = UNSET


SCHEMA_TYPES: tuple[type[Envelope], ...] = (
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
SCHEMAS: dict[str, type[Envelope]] = {str(t.__struct_config__.tag): t for t in SCHEMA_TYPES}
EVENT_TYPES = tuple(SCHEMAS)  # every type this build validates and folds

_decoder = msgspec.json.Decoder(Union[SCHEMA_TYPES])
_to_builtins = msgspec.to_builtins
Refused = (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError)


def decode(line: bytes | str) -> dict[str, Any]:
    """The normalised event of one line (the fast path: parsed and checked in C).

    Raises:
        msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError (`Refused`):
            the schema does not take the line (the general path decides what it is).
    """
    out: dict[str, Any] = _to_builtins(_decoder.decode(line))
    return out

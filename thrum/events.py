"""Event types of the thrum log: validation, encoding, decoding.

Rules this module keeps (everything else relies on them):

1. An event is one JSON object on one line. Common fields: ``type``,
   ``timestamp`` (RFC 3339 UTC), ``event_id`` (ULID, the universal dedup key)
   and ``v`` (schema version, 1).
2. Every event is validated when it is built *and* when it is read back: the
   log is untrusted input (anyone who can push to the remote can write a line).
   `decode_line` returns a normalised dict or raises `MalformedEvent`.
3. Unknown types and future versions are kept as `UnknownEvent` with their raw
   fields; they are passed on and replicated, never dropped.
4. Each event names the shard it belongs to (`shard_for`): message events in
   ``messages/{agent}.jsonl``, receipts in ``receipts/{agent}.jsonl``,
   lifecycle and group events in ``events.jsonl``.

The projection folds the normalised dicts directly (fast path for rebuilds);
the frozen dataclasses are what the write path builds.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, ClassVar

from ulid import ULID

from . import safejson
from .errors import ValidationError

try:  # orjson is a declared dependency; the fallback keeps the pure core importable anywhere.
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

EVENT_VERSION = 1

FORMATS = ("markdown", "plain", "json")
PRIORITIES = ("low", "normal", "high", "critical")
END_REASONS = ("normal", "crash")
CLEANUP_METHODS = ("manual", "automated", "ui")
AGENT_KINDS = ("agent", "user")
MEMBER_TYPES = ("agent", "role")

MAX_CONTENT_BYTES = 16 * 1024 * 1024  # hard cap for log input; the RPC limit is lower and configurable
MAX_LINE_BYTES = 20 * 1024 * 1024
MAX_REFS = 256
MAX_IDS = 10_000

NAME_RE = re.compile(r"[a-z0-9_]{1,64}")
RESERVED_NAMES = frozenset({"daemon", "system", "thrum", "all", "broadcast"})
ULID_RE = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_ID_BODY = r"[0-9A-Za-z_\-]{1,80}"
MESSAGE_ID_RE = re.compile(r"msg_" + _ID_BODY)
SESSION_ID_RE = re.compile(r"(?:ses|s)_" + _ID_BODY)
THREAD_ID_RE = re.compile(r"(?:thr|thread)_" + _ID_BODY)
GROUP_ID_RE = re.compile(r"grp_" + _ID_BODY)
TAG_TYPE_RE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
TIMESTAMP_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})"
)
MAX_TAG_VALUE = 4096


class MalformedEvent(ValueError):
    """A log line that is not a valid event (kept in the file, skipped by the fold)."""


# --------------------------------------------------------------------------- ids, time

_ulid_lock = threading.Lock()
_last_ulid = 0


def new_ulid() -> str:
    """A ULID that is strictly greater than every ULID this process made before.

    Last-writer-wins rules compare event ids, so two events made in the same
    millisecond by one writer must still sort in the order they were made.
    """
    global _last_ulid
    with _ulid_lock:
        now_ms = time.time_ns() // 1_000_000
        candidate = int(ULID.from_timestamp(now_ms / 1000))
        # Keep the timestamp part exact; random part from the library.
        candidate = (now_ms << 80) | (candidate & ((1 << 80) - 1))
        if candidate <= _last_ulid:
            candidate = _last_ulid + 1
        _last_ulid = candidate
        return str(ULID.from_int(candidate))


def new_id(prefix: str) -> str:
    """``msg_``/``ses_``/``thr_``/``grp_`` + ULID."""
    return f"{prefix}_{new_ulid()}"


def now_rfc3339() -> str:
    """Current UTC time, millisecond precision, ``Z`` suffix."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def parse_time(value: str) -> datetime:
    """RFC 3339 string to an aware datetime (used for display and sorting only)."""
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    return datetime.fromisoformat(value)


def time_key(value: str) -> str:
    """A string that sorts like the instant ``value`` names: UTC, milliseconds, ``Z``.

    That is the form `now_rfc3339` writes, so our own timestamps are their own key.
    Other producers may write seconds only, more digits or an offset; as plain
    strings those do not sort by time ("...:00Z" sorts after "...:00.5Z"). Values
    that do not parse are returned unchanged.
    """
    if len(value) == 24 and value[23] == "Z" and value[19] == ".":
        return value
    try:
        dt = parse_time(value).astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return value
    return (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:"
            f"{dt.second:02d}.{dt.microsecond // 1000:03d}Z")


# --------------------------------------------------------------------------- validation helpers

def _fail(field_name: str, why: str):
    raise ValidationError(f"{field_name}: {why}", field=field_name)


def _str(d: dict, key: str, *, required: bool = True, pattern: re.Pattern | None = None,
         max_len: int = 4096, default: str = "") -> str:
    value = d.get(key, None)
    if value is None:
        if required:
            _fail(key, "is required")
        return default
    if not isinstance(value, str):
        _fail(key, "must be a string")
    if required and not value:
        _fail(key, "must not be empty")
    if len(value) > max_len:
        _fail(key, f"is longer than {max_len} characters")
    if pattern is not None and value and not pattern.fullmatch(value):
        _fail(key, f"invalid value {value[:80]!r}")
    return value


def _choice(d: dict, key: str, choices: tuple, default: str) -> str:
    value = d.get(key, default)
    if value is None or value == "":
        value = default
    if value not in choices:
        _fail(key, f"must be one of {', '.join(choices)} (got {str(value)[:40]!r})")
    return value


def check_name(name: Any, field_name: str = "name") -> str:
    """Agent names: ``[a-z0-9_]+``, not reserved. They name shard files, so this is also path safety."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        _fail(field_name, f"invalid agent name {str(name)[:80]!r}: use lowercase letters, digits and _ (max 64)")
    if name in RESERVED_NAMES:
        _fail(field_name, f"{name!r} is a reserved name")
    return name


def _agent(d: dict, key: str = "agent_id") -> str:
    value = d.get(key)
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        _fail(key, f"invalid agent id {str(value)[:80]!r}")
    return value


def _tags(d: dict, key: str) -> list[dict]:
    value = d.get(key) or []
    if not isinstance(value, list):
        _fail(key, "must be a list of {type, value} objects")
    if len(value) > MAX_REFS:
        _fail(key, f"has more than {MAX_REFS} entries")
    out = []
    seen = set()
    for item in value:
        if not isinstance(item, dict):
            _fail(key, "entries must be {type, value} objects")
        t, v = item.get("type"), item.get("value")
        if not isinstance(t, str) or not TAG_TYPE_RE.fullmatch(t):
            _fail(key, f"invalid type {str(t)[:40]!r}")
        if not isinstance(v, str) or not v or len(v) > MAX_TAG_VALUE:
            _fail(key, f"invalid value for type {t!r}")
        if (t, v) not in seen:
            seen.add((t, v))
            out.append({"type": t, "value": v})
    return out


def _body(d: dict) -> dict:
    body = d.get("body")
    if not isinstance(body, dict):
        _fail("body", "must be an object with format and content")
    fmt = _choice(body, "format", FORMATS, "markdown")
    content = body.get("content")
    if not isinstance(content, str):
        _fail("body.content", "must be a string")
    if len(content) > MAX_CONTENT_BYTES:
        _fail("body.content", "is too large")
    structured = body.get("structured") or ""
    if not isinstance(structured, str):
        _fail("body.structured", "must be a JSON string")
    if structured:
        try:
            safejson.loads(structured)
        except ValueError as exc:
            _fail("body.structured", f"is not valid JSON ({str(exc)[:80]})")
    return {"format": fmt, "content": content, "structured": structured}


def _ids(d: dict, key: str = "message_ids") -> list[str]:
    value = d.get(key)
    if not isinstance(value, list) or not value:
        _fail(key, "must be a non-empty list of message ids")
    if len(value) > MAX_IDS:
        _fail(key, f"has more than {MAX_IDS} entries")
    out = []
    seen = set()
    for item in value:
        if not isinstance(item, str) or not MESSAGE_ID_RE.fullmatch(item):
            _fail(key, f"invalid message id {str(item)[:80]!r}")
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


# --------------------------------------------------------------------------- per-type field normalisers
# Each takes the raw dict and returns the normalised type-specific fields.

_FAST_TAG_TYPES: set[str] = set()  # tag types already seen to match TAG_TYPE_RE (bounded)


def _fast_tags(value) -> list | None:
    """`_tags` for the common case; None means "let `_tags` decide (and explain)"."""
    if not value:
        return [] if value is None or value == [] else None
    if type(value) is not list or len(value) > MAX_REFS:
        return None
    out = []
    for item in value:
        if type(item) is not dict:
            return None
        t = item.get("type")
        v = item.get("value")
        if type(t) is not str or type(v) is not str or not v or len(v) > MAX_TAG_VALUE:
            return None
        if t not in _FAST_TAG_TYPES:
            if not TAG_TYPE_RE.fullmatch(t):
                return None
            if len(_FAST_TAG_TYPES) < 1024:
                _FAST_TAG_TYPES.add(t)
        out.append(item if len(item) == 2 else {"type": t, "value": v})  # reuse an exact {type, value}
    if len(out) > 1 and len({(x["type"], x["value"]) for x in out}) < len(out):
        return None
    return out


_MSG_ID_MATCH = MESSAGE_ID_RE.fullmatch
_SES_ID_MATCH = SESSION_ID_RE.fullmatch
_THR_ID_MATCH = THREAD_ID_RE.fullmatch
_NAME_MATCH = NAME_RE.fullmatch


def _n_message_create(d):
    # Fast path (rebuilds decode a million of these): the same rules as the
    # general path below, checked inline; anything unusual takes the general path,
    # which produces the precise error.
    mid, thr, agent, sid = d.get("message_id"), d.get("thread_id"), d.get("agent_id"), d.get("session_id")
    body = d.get("body")
    prio = d.get("priority")
    if (type(mid) is str and len(mid) <= 84 and _MSG_ID_MATCH(mid)
            and (thr is None or thr == "" or (type(thr) is str and len(thr) <= 87 and _THR_ID_MATCH(thr)))
            and type(agent) is str and _NAME_MATCH(agent)
            and type(sid) is str and len(sid) <= 84 and _SES_ID_MATCH(sid)
            and type(body) is dict and (prio is None or prio == "" or prio in PRIORITIES)):
        fmt, content, structured = body.get("format"), body.get("content"), body.get("structured")
        authored = d.get("authored_by")
        if ((fmt in FORMATS or fmt is None or fmt == "") and type(content) is str
                and len(content) <= MAX_CONTENT_BYTES and (structured is None or structured == "")
                and (authored is None or (type(authored) is str and len(authored) <= 256))):
            scopes = _fast_tags(d.get("scopes"))
            refs = _fast_tags(d.get("refs")) if scopes is not None else None
            if refs is not None:
                if not (fmt and structured == "" and len(body) == 3):
                    body = {"format": fmt or "markdown", "content": content, "structured": ""}
                return {
                    "message_id": mid, "thread_id": thr or "", "agent_id": agent, "session_id": sid,
                    "body": body,
                    "scopes": scopes, "refs": refs, "priority": prio or "normal",
                    "authored_by": authored or "", "disclosed": bool(d.get("disclosed", False)),
                }
    return _n_message_create_checked(d)


def _n_message_create_checked(d):
    return {
        "message_id": _str(d, "message_id", pattern=MESSAGE_ID_RE),
        "thread_id": _str(d, "thread_id", required=False, pattern=THREAD_ID_RE),
        "agent_id": _agent(d),
        "session_id": _str(d, "session_id", pattern=SESSION_ID_RE),
        "body": _body(d),
        "scopes": _tags(d, "scopes"),
        "refs": _tags(d, "refs"),
        "priority": _choice(d, "priority", PRIORITIES, "normal"),
        "authored_by": _str(d, "authored_by", required=False, max_len=256),
        "disclosed": bool(d.get("disclosed", False)),
    }


def _n_message_edit(d):
    return {
        "message_id": _str(d, "message_id", pattern=MESSAGE_ID_RE),
        "agent_id": _agent(d),
        "session_id": _str(d, "session_id", required=False, pattern=SESSION_ID_RE),
        "body": _body(d),
    }


def _n_message_delete(d):
    return {
        "message_id": _str(d, "message_id", pattern=MESSAGE_ID_RE),
        "agent_id": _agent(d),
        "session_id": _str(d, "session_id", required=False, pattern=SESSION_ID_RE),
        "reason": _str(d, "reason", required=False, max_len=1024),
    }


def _n_thread_create(d):
    return {
        "thread_id": _str(d, "thread_id", pattern=THREAD_ID_RE),
        "title": _str(d, "title", required=False, max_len=1024),
        "created_by": _agent(d, "created_by"),
    }


def _n_agent_register(d):
    name = _str(d, "name", required=False, max_len=64) or d.get("agent_id")
    agent_id = _agent(d)
    if name != agent_id:
        _fail("name", "must equal agent_id")
    return {
        "agent_id": agent_id,
        "kind": _choice(d, "kind", AGENT_KINDS, "agent"),
        "name": agent_id,
        "role": _str(d, "role", pattern=NAME_RE),
        "module": _str(d, "module", required=False, max_len=256),
        "worktree": _str(d, "worktree", required=False, max_len=1024),
        "display": _str(d, "display", required=False, max_len=256),
    }


def _n_agent_update(d):
    ctx = d.get("work_contexts") or []
    if not isinstance(ctx, list) or not all(isinstance(c, dict) for c in ctx):
        _fail("work_contexts", "must be a list of objects")
    return {"agent_id": _agent(d), "work_contexts": ctx}


def _n_agent_cleanup(d):
    return {
        "agent_id": _agent(d),
        "reason": _str(d, "reason", required=False, max_len=1024),
        "method": _choice(d, "method", CLEANUP_METHODS, "manual"),
    }


def _n_session_start(d):
    return {
        "session_id": _str(d, "session_id", pattern=SESSION_ID_RE),
        "agent_id": _agent(d),
    }


def _n_session_end(d):
    agent = d.get("agent_id")
    return {
        "session_id": _str(d, "session_id", pattern=SESSION_ID_RE),
        "agent_id": _agent(d) if agent else "",
        "reason": _choice(d, "reason", END_REASONS, "normal"),
    }


def _n_group_create(d):
    return {
        "group_id": _str(d, "group_id", pattern=GROUP_ID_RE),
        "name": _group_name(d),
        "description": _str(d, "description", required=False, max_len=1024),
        "created_by": _agent(d, "created_by"),
    }


def _group_name(d, key="name"):
    value = d.get(key)
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        _fail(key, f"invalid group name {str(value)[:80]!r}: use lowercase letters, digits and _")
    if value == "everyone":
        _fail(key, "'everyone' is built in")
    return value


def _n_group_delete(d):
    return {"name": _group_name(d), "deleted_by": _agent(d, "deleted_by")}


def _n_group_member(d):
    mtype = _choice(d, "member_type", MEMBER_TYPES, "agent")
    value = d.get("member_value")
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        _fail("member_value", f"invalid {mtype} name {str(value)[:80]!r}")
    return {"group": _group_name(d, "group"), "member_type": mtype, "member_value": value,
            "agent_id": _agent(d)}


def _n_receipt(d):
    return {
        "agent_id": _agent(d),
        "session_id": _str(d, "session_id", required=False, pattern=SESSION_ID_RE),
        "message_ids": _ids(d),
    }


NORMALISERS = {
    "message.create": _n_message_create,
    "message.edit": _n_message_edit,
    "message.delete": _n_message_delete,
    "thread.create": _n_thread_create,
    "agent.register": _n_agent_register,
    "agent.update": _n_agent_update,
    "agent.cleanup": _n_agent_cleanup,
    "agent.session.start": _n_session_start,
    "agent.session.end": _n_session_end,
    "group.create": _n_group_create,
    "group.delete": _n_group_delete,
    "group.member.add": _n_group_member,
    "group.member.remove": _n_group_member,
    "message.read": _n_receipt,
    "message.unread": _n_receipt,
    "message.archive": _n_receipt,
}

EVENT_TYPES = tuple(NORMALISERS)
MESSAGE_SHARD_TYPES = frozenset({"message.create", "message.edit", "message.delete",
                                 "thread.create", "agent.update"})
RECEIPT_TYPES = frozenset({"message.read", "message.unread", "message.archive"})


def normalise(d: Any) -> dict:
    """Validate a raw event dict; return it normalised (known fields only, defaults filled).

    Unknown types or future versions come back unchanged apart from the common
    checks, with ``"_unknown": True`` never added to the stored line (callers keep
    the original line bytes).

    Raises:
        ValidationError: the dict is not a valid event.
    """
    if not isinstance(d, dict):
        raise ValidationError("event must be a JSON object", field="event")
    etype = d.get("type")
    if not isinstance(etype, str) or not etype:
        _fail("type", "is required")
    event_id = d.get("event_id")
    if not isinstance(event_id, str) or not ULID_RE.fullmatch(event_id):
        _fail("event_id", f"must be a ULID (got {str(event_id)[:40]!r})")
    ts = d.get("timestamp")
    if not isinstance(ts, str) or not TIMESTAMP_RE.fullmatch(ts):
        _fail("timestamp", "must be an RFC 3339 time")
    v = d.get("v", EVENT_VERSION)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        _fail("v", "must be a positive integer")
    handler = NORMALISERS.get(etype)
    if handler is None or v > EVENT_VERSION:
        return d  # preserved as-is
    out = {"type": etype, "timestamp": ts, "event_id": event_id, "v": v}
    out.update(handler(d))
    return out


def is_known(d: dict) -> bool:
    return d.get("type") in NORMALISERS and d.get("v", 1) <= EVENT_VERSION


def event_owner(d: dict) -> str | None:
    """The agent an event's shard must belong to (None for events.jsonl events)."""
    t = d.get("type")
    if t in MESSAGE_SHARD_TYPES or t in RECEIPT_TYPES:
        return d.get("created_by") if t == "thread.create" else d.get("agent_id")
    return None


def shard_for(d: dict) -> str:
    """Relative path of the shard file this event is appended to."""
    t = d.get("type")
    if t in MESSAGE_SHARD_TYPES:
        return f"messages/{event_owner(d)}.jsonl"
    if t in RECEIPT_TYPES:
        return f"receipts/{d['agent_id']}.jsonl"
    return "events.jsonl"


def shard_owner(shard: str) -> str | None:
    """Inverse of `shard_for`: the agent a shard path belongs to, or None for events.jsonl.

    Raises:
        ValueError: the path is not a shard thrum writes.
    """
    if shard == "events.jsonl":
        return None
    for prefix in ("messages/", "receipts/"):
        if shard.startswith(prefix) and shard.endswith(".jsonl"):
            name = shard[len(prefix):-len(".jsonl")]
            if NAME_RE.fullmatch(name):
                return name
    raise ValueError(f"not a thrum shard: {shard!r}")


def shard_kind(shard: str) -> str:
    return "events" if shard == "events.jsonl" else shard.split("/", 1)[0]


def allowed_in_shard(d: dict, shard: str) -> bool:
    """The authorship rule: a shard only carries events of its own agent and kind."""
    t = d.get("type")
    kind = shard_kind(shard)
    if t in MESSAGE_SHARD_TYPES:
        return kind == "messages" and shard == f"messages/{event_owner(d)}.jsonl"
    if t in RECEIPT_TYPES:
        return kind == "receipts" and shard == f"receipts/{d.get('agent_id')}.jsonl"
    if t in NORMALISERS:
        return kind == "events"
    return True  # unknown types: kept, not judged


# --------------------------------------------------------------------------- encode / decode

def dumps(obj: Any) -> bytes:
    """Compact JSON bytes, no trailing newline."""
    if _orjson is not None:
        return _orjson.dumps(obj)
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def loads(data: bytes | str) -> Any:
    if _orjson is not None:
        return _orjson.loads(data)
    return json.loads(data)


def encode_line(d: dict) -> bytes:
    """One event dict to one JSONL line (with the trailing newline)."""
    return dumps(d) + b"\n"


def decode_line(line: bytes | str) -> dict:
    """Parse and validate one log line.

    Raises:
        MalformedEvent: not JSON, not an object, or not a valid event.
    """
    if len(line) > MAX_LINE_BYTES:
        raise MalformedEvent("line too long")
    try:
        raw = safejson.loads(line)
    except ValueError as exc:
        raise MalformedEvent(f"not JSON: {exc}") from None
    try:
        return normalise(raw)
    except ValidationError as exc:
        raise MalformedEvent(exc.message) from None
    except Exception as exc:  # noqa: BLE001 - the log is untrusted: no line may escape as a crash
        raise MalformedEvent(f"invalid event ({type(exc).__name__}: {str(exc)[:120]})") from None


# --------------------------------------------------------------------------- typed events (write path)

@dataclass(frozen=True, kw_only=True)
class Event:
    """Base of every typed event. Don't construct directly; use a subclass."""

    TYPE: ClassVar[str] = ""
    event_id: str = field(default_factory=new_ulid)
    timestamp: str = field(default_factory=now_rfc3339)
    v: int = EVENT_VERSION

    def __post_init__(self):
        normalise(self.to_dict())  # raises ValidationError on any bad field

    @property
    def type(self) -> str:
        return self.TYPE

    def to_dict(self) -> dict:
        d = {"type": self.TYPE, "timestamp": self.timestamp, "event_id": self.event_id, "v": self.v}
        for f in fields(self):
            if f.name not in d:
                d[f.name] = _plain(getattr(self, f.name))
        return d

    def to_line(self) -> bytes:
        return encode_line(self.to_dict())

    @property
    def shard(self) -> str:
        return shard_for(self.to_dict())


def _plain(value):
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
        if not isinstance(text, str) or ":" not in text:
            raise ValidationError(f"{what} must look like type:value (got {str(text)[:60]!r})", field=what)
        t, v = text.split(":", 1)
        if not TAG_TYPE_RE.fullmatch(t) or not v:
            raise ValidationError(f"{what} must look like type:value (got {text[:60]!r})", field=what)
        return cls(t, v)


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


@dataclass(frozen=True, kw_only=True)
class MessageEdit(Event):
    TYPE: ClassVar[str] = "message.edit"
    message_id: str
    agent_id: str
    session_id: str = ""
    body: Body


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

    def __post_init__(self):
        if not self.name:  # the name is the agent id; fill it so the event equals its decoded self
            object.__setattr__(self, "name", self.agent_id)
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class AgentUpdate(Event):
    TYPE: ClassVar[str] = "agent.update"
    agent_id: str
    work_contexts: tuple = ()


@dataclass(frozen=True, kw_only=True)
class AgentCleanup(Event):
    TYPE: ClassVar[str] = "agent.cleanup"
    agent_id: str
    reason: str = ""
    method: str = "manual"


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


@dataclass(frozen=True)
class UnknownEvent:
    """An event of a type (or version) this build does not know: kept and passed on."""

    raw: dict

    @property
    def type(self) -> str:
        return self.raw.get("type", "")

    @property
    def event_id(self) -> str:
        return self.raw.get("event_id", "")

    def to_dict(self) -> dict:
        return dict(self.raw)

    def to_line(self) -> bytes:
        return encode_line(self.raw)


TYPED = {cls.TYPE: cls for cls in (
    MessageCreate, MessageEdit, MessageDelete, ThreadCreate, AgentRegister, AgentUpdate,
    AgentCleanup, SessionStart, SessionEnd, GroupCreate, GroupDelete, GroupMemberAdd,
    GroupMemberRemove, MessageRead, MessageUnread, MessageArchive,
)}
assert set(TYPED) == set(NORMALISERS)


def from_dict(d: dict) -> Event | UnknownEvent:
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
                value = Body(content=value["content"], format=value["format"],
                             structured=value["structured"])
            elif f.name in ("scopes", "refs"):
                value = tuple(Tag(t["type"], t["value"]) for t in value)
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[f.name] = value
    return cls(**kwargs)

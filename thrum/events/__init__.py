"""Event types of the thrum log: ids, validation, shards, encoding, the typed events.

Rules this package keeps (everything else relies on them):

1. An event is one JSON object on one line. Common fields: ``type``,
   ``timestamp`` (RFC 3339 UTC), ``event_id`` (ULID, the universal dedup key)
   and ``v`` (schema version, 1).
2. Every event is validated when it is built *and* when it is read back: the
   log is untrusted input (anyone who can push to the remote can write a line).
   `decode_line` returns a normalised dict or raises `MalformedEvent`.
3. Unknown types and future versions are kept as `UnknownEvent` with their raw
   fields; they are passed on and replicated, never dropped.
4. Each event names the stream it belongs to (`stream_for`): message events in
   ``messages/{agent}``, receipts in ``receipts/{agent}``, lifecycle and group
   events in ``events``; a stream is stored as size-capped segments
   ``{stream}/{n}.jsonl`` and carries only its own agent's events
   (`allowed_in_shard`).

The modules, each with one job (pure: no I/O, no trio, no pygit2):

- `values`: closed vocabularies (formats, priorities, ...) and size limits;
- `names`: what an agent, role or group may be called;
- `tags`: what a scope or ref (``{type, value}``) is;
- `ids`: ULIDs, prefixed ids, timestamps and their sort keys;
- `checks`: what the schema is built from: patterns, and how a bad field is worded;
- `schema`: the event types, declared once: one msgspec Struct each (fields, types,
  limits, wording, the rules across fields), and how a log line is decoded in C;
- `validation`: the general path: a dict validated by the schema (`normalise`);
- `shards`: the layout (streams, segment paths) and the authorship rules;
- `codec`: one event ↔ one JSON line;
- `typed`: the schema's Structs as the write path builds them.

Callers write ``from thrum import events as ev`` and ``ev.MessageCreate(...)``.
The names are loaded lazily (PEP 562), so a caller that needs only a cheap rule
(the CLI's start-up path imports `names`, `tags`, `values`) does not pay for the
ULID library or the dataclasses.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: `names` is on thrum-gc-mail's start-up path, which does not import typing
if TYPE_CHECKING:  # the same names, for type checkers; at run time `__getattr__` loads them
    from typing import Any

    from .codec import MalformedEvent, decode_line, dumps, encode_line, loads
    from .ids import (
        GROUP_ID_RE,
        MESSAGE_ID_RE,
        SESSION_ID_RE,
        THREAD_ID_RE,
        TIMESTAMP_RE,
        ULID_RE,
        event_time_ms,
        new_id,
        new_ulid,
        ms_rfc3339,
        now_rfc3339,
        parse_time,
        time_key,
        is_valid_timestamp,
        ulid_after,
        ulid_ms,
    )
    from .names import NAME_RE, RESERVED_NAMES, check_name, is_name
    from .schema import EVENT_TYPES, SCHEMAS
    from .validation import is_known, normalise
    from .layout import (
        EVENTS_STREAM,
        check_stream,
        is_log_path,
        parse_log_path,
        segment_name,
        segment_number,
        segment_path,
        shard_kind,
        shard_owner,
        stream_of,
    )
    from .shards import (
        MESSAGE_SHARD_TYPES,
        RECEIPT_TYPES,
        ShardRule,
        allowed_in_shard,
        event_author,
        event_owner,
        stream_for,
    )
    from .tags import MAX_TAG_VALUE, TAG_TYPE_RE, is_tag_type, is_tag_value, split_tag, tag_fields
    from .typed import (
        TYPED,
        AgentAdmit,
        AgentCleanup,
        AgentHeartbeat,
        AgentRegister,
        AgentRevoke,
        AgentRotate,
        AgentUpdate,
        Body,
        Event,
        GroupCreate,
        GroupDelete,
        GroupMemberAdd,
        GroupMemberRemove,
        MessageAcked,
        MessageArchive,
        MessageCreate,
        MessageDelete,
        MessageDelivered,
        MessageEdit,
        MessageRead,
        MessageSurfaced,
        MessageUnread,
        SessionEnd,
        SessionStart,
        Tag,
        ThreadCreate,
        UnknownEvent,
        from_dict,
    )
    from .values import (
        AGENT_KINDS,
        CLEANUP_METHODS,
        END_REASONS,
        EVENT_VERSION,
        FORMATS,
        MAX_ACK_WITHIN,
        MAX_CONTENT_BYTES,
        MAX_IDS,
        MAX_LINE_BYTES,
        MAX_REFS,
        MAX_SUBJECT_CHARS,
        MEMBER_TYPES,
        PRIORITIES,
    )

_MODULES: dict[str, tuple[str, ...]] = {
    "codec": ("MalformedEvent", "decode_line", "dumps", "encode_line", "loads"),
    "ids": (
        "GROUP_ID_RE",
        "MESSAGE_ID_RE",
        "SESSION_ID_RE",
        "THREAD_ID_RE",
        "TIMESTAMP_RE",
        "ULID_RE",
        "event_time_ms",
        "new_id",
        "new_ulid",
        "ms_rfc3339",
        "now_rfc3339",
        "parse_time",
        "time_key",
        "is_valid_timestamp",
        "ulid_after",
        "ulid_ms",
    ),
    "names": ("NAME_RE", "RESERVED_NAMES", "check_name", "is_name"),
    "schema": ("EVENT_TYPES", "SCHEMAS"),
    "validation": ("is_known", "normalise"),
    "layout": (
        "EVENTS_STREAM",
        "check_stream",
        "is_log_path",
        "parse_log_path",
        "segment_name",
        "segment_number",
        "segment_path",
        "shard_kind",
        "shard_owner",
        "stream_of",
    ),
    "shards": (
        "MESSAGE_SHARD_TYPES",
        "RECEIPT_TYPES",
        "ShardRule",
        "allowed_in_shard",
        "event_author",
        "event_owner",
        "stream_for",
    ),
    "tags": ("MAX_TAG_VALUE", "TAG_TYPE_RE", "is_tag_type", "is_tag_value", "split_tag", "tag_fields"),
    "typed": (
        "TYPED",
        "AgentAdmit",
        "AgentCleanup",
        "AgentHeartbeat",
        "AgentRegister",
        "AgentRevoke",
        "AgentRotate",
        "AgentUpdate",
        "Body",
        "Event",
        "GroupCreate",
        "GroupDelete",
        "GroupMemberAdd",
        "GroupMemberRemove",
        "MessageAcked",
        "MessageArchive",
        "MessageCreate",
        "MessageDelete",
        "MessageDelivered",
        "MessageEdit",
        "MessageRead",
        "MessageSurfaced",
        "MessageUnread",
        "SessionEnd",
        "SessionStart",
        "Tag",
        "ThreadCreate",
        "UnknownEvent",
        "from_dict",
    ),
    "values": (
        "AGENT_KINDS",
        "CLEANUP_METHODS",
        "END_REASONS",
        "EVENT_VERSION",
        "FORMATS",
        "MAX_ACK_WITHIN",
        "MAX_CONTENT_BYTES",
        "MAX_IDS",
        "MAX_LINE_BYTES",
        "MAX_REFS",
        "MAX_SUBJECT_CHARS",
        "MEMBER_TYPES",
        "PRIORITIES",
    ),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """Load a public name from the module that defines it (once; then it is a plain attribute)."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))

"""Validation of event fields: one normaliser per event type, and `normalise`.

Every event is validated when it is built *and* when it is read back: the log is
untrusted input (anyone who can push to the remote can write a line). `normalise`
returns the event with known fields only and defaults filled, or raises
`ValidationError` naming the first bad field. Unknown types and future versions
pass the common checks and come back unchanged (they are kept, never dropped).

``message.create`` has a fast path (a rebuild decodes a million of them) that
checks the same rules inline; a property test holds it to the checked path. The
checks of single fields the normalisers are built from are `thrum.events.fields`.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..errors import ValidationError
from .fields import Raw, agent_field, body_field, chain_field, choice_field, fail, id_list, str_field, tag_list
from .ids import (
    GROUP_ID_RE,
    MAX_YEAR,
    MESSAGE_ID_RE,
    MIN_YEAR,
    SESSION_ID_RE,
    THREAD_ID_RE,
    is_valid_timestamp,
    ULID_RE,
)
from .names import NAME_RE, UNUSABLE_NAMES
from .team_fields import invite_field, n_agent_admit, n_agent_revoke, n_agent_rotate
from .tags import MAX_TAG_VALUE, TAG_TYPE_RE
from .values import (
    AGENT_KINDS,
    CLEANUP_METHODS,
    END_REASONS,
    EVENT_VERSION,
    FORMATS,
    MAX_ACK_WITHIN,
    MAX_CONTENT_BYTES,
    MAX_REFS,
    MAX_SUBJECT_CHARS,
    MAX_VIA_CHARS,
    MEMBER_TYPES,
    PRIORITIES,
)

# A client's name for one logical write (message.create, message.edit): a repeat of the
# key by the same agent is the same write (thrum/daemon/idempotency.py). Optional; kept
# in the event so that it survives restarts and rebuilds with the log.
IDEMPOTENCY_KEY_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")


# --------------------------------------------------------------------------- per-type field normalisers
# Each takes the raw dict and returns the normalised type-specific fields.

_FAST_TAG_TYPES: set[str] = set()  # tag types already seen to match TAG_TYPE_RE (bounded)


def _fast_tags(value: Any) -> list[Raw] | None:
    """`tag_list` for the common case; None means "let `tag_list` decide (and explain)"."""
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


def _n_message_create(d: Raw) -> Raw:
    # Fast path (rebuilds decode a million of these): the same rules as the
    # general path below, checked inline; anything unusual takes the general path,
    # which produces the precise error.
    mid, thr, agent, sid = d.get("message_id"), d.get("thread_id"), d.get("agent_id"), d.get("session_id")
    body = d.get("body")
    prio = d.get("priority")
    if (
        type(mid) is str
        and len(mid) <= 84
        and _MSG_ID_MATCH(mid)
        and (thr is None or thr == "" or (type(thr) is str and len(thr) <= 87 and _THR_ID_MATCH(thr)))
        and type(agent) is str
        and _NAME_MATCH(agent)
        and type(sid) is str
        and len(sid) <= 84
        and _SES_ID_MATCH(sid)
        and type(body) is dict
        and (prio is None or prio == "" or prio in PRIORITIES)
        and d.get("ack") is None
        and d.get("ack_within") is None
    ):
        fmt, content, structured = body.get("format"), body.get("content"), body.get("structured")
        authored = d.get("authored_by")
        subject = d.get("subject")
        if (
            (fmt in FORMATS or fmt is None or fmt == "")
            and type(content) is str
            and len(content) <= MAX_CONTENT_BYTES
            and (structured is None or structured == "")
            and (authored is None or (type(authored) is str and len(authored) <= 256))
            and (subject is None or (type(subject) is str and len(subject) <= MAX_SUBJECT_CHARS))
        ):
            scopes = _fast_tags(d.get("scopes"))
            refs = _fast_tags(d.get("refs")) if scopes is not None else None
            key = d.get("idempotency_key")
            if refs is not None and (key is None or (type(key) is str and _KEY_MATCH(key))):
                if not (fmt and structured == "" and len(body) == 3):
                    body = {"format": fmt or "markdown", "content": content, "structured": ""}
                out = {
                    "message_id": mid,
                    "thread_id": thr or "",
                    "agent_id": agent,
                    "session_id": sid,
                    "body": body,
                    "scopes": scopes,
                    "refs": refs,
                    "priority": prio or "normal",
                    "authored_by": authored or "",
                    "disclosed": bool(d.get("disclosed", False)),
                    "subject": subject or "",
                }
                if key:
                    out["idempotency_key"] = key
                return out
    return _n_message_create_checked(d)


_KEY_MATCH = IDEMPOTENCY_KEY_RE.fullmatch


def _with_key(d: Raw, out: Raw) -> Raw:
    """``out`` plus the event's idempotency key, when it has one (absent: no field at all)."""
    key = str_field(d, "idempotency_key", required=False, pattern=IDEMPOTENCY_KEY_RE, max_len=128)
    if key:
        out["idempotency_key"] = key
    return out


def _n_message_create_checked(d: Raw) -> Raw:
    return _with_ack(
        d,
        _with_key(
            d,
            {
                "message_id": str_field(d, "message_id", pattern=MESSAGE_ID_RE),
                "thread_id": str_field(d, "thread_id", required=False, pattern=THREAD_ID_RE),
                "agent_id": agent_field(d),
                "session_id": str_field(d, "session_id", pattern=SESSION_ID_RE),
                "body": body_field(d),
                "scopes": tag_list(d, "scopes"),
                "refs": tag_list(d, "refs"),
                "priority": choice_field(d, "priority", PRIORITIES, "normal"),
                "authored_by": str_field(d, "authored_by", required=False, max_len=256),
                "disclosed": bool(d.get("disclosed", False)),
                "subject": str_field(d, "subject", required=False, max_len=MAX_SUBJECT_CHARS),
            },
        ),
    )


def _with_ack(d: Raw, out: Raw) -> Raw:
    """``out`` plus the sender's request for an acknowledgement, when it asks for one:
    ``ack: true`` and optionally ``ack_within`` (seconds after the message's timestamp).
    Lines without a request have neither field, so they stay as they were."""
    ack, within = d.get("ack"), d.get("ack_within")
    if ack is None and within is None:
        return out
    if ack is not None and ack is not True and ack is not False:
        fail("ack", "must be true or false")
    if within is not None:
        if type(within) is not int or not 1 <= within <= MAX_ACK_WITHIN:
            fail("ack_within", f"must be a whole number of seconds from 1 to {MAX_ACK_WITHIN}")
        if not ack:
            fail("ack_within", "needs ack: true")
    if ack:
        out["ack"] = True
        if within is not None:
            out["ack_within"] = within
    return out


def _n_message_edit(d: Raw) -> Raw:
    return _with_key(
        d,
        {
            "message_id": str_field(d, "message_id", pattern=MESSAGE_ID_RE),
            "agent_id": agent_field(d),
            "session_id": str_field(d, "session_id", required=False, pattern=SESSION_ID_RE),
            "body": body_field(d),
        },
    )


def _n_message_delete(d: Raw) -> Raw:
    return {
        "message_id": str_field(d, "message_id", pattern=MESSAGE_ID_RE),
        "agent_id": agent_field(d),
        "session_id": str_field(d, "session_id", required=False, pattern=SESSION_ID_RE),
        "reason": str_field(d, "reason", required=False, max_len=1024),
    }


def _n_thread_create(d: Raw) -> Raw:
    return {
        "thread_id": str_field(d, "thread_id", pattern=THREAD_ID_RE),
        "title": str_field(d, "title", required=False, max_len=1024),
        "created_by": agent_field(d, "created_by"),
    }


def _n_agent_register(d: Raw) -> Raw:
    name = str_field(d, "name", required=False, max_len=64) or d.get("agent_id")
    agent_id = agent_field(d)  # never a reserved name (fields.agent_field)
    if name != agent_id:
        fail("name", "must equal agent_id")
    role = str_field(d, "role", pattern=NAME_RE)
    if role in UNUSABLE_NAMES:
        fail("role", f"{role!r} is reserved: no role may be called that")
    if role == agent_id:  # @name would mean the agent and its role at once
        fail("role", "must differ from the agent's name")
    return {
        "agent_id": agent_id,
        "kind": choice_field(d, "kind", AGENT_KINDS, "agent"),
        "name": agent_id,
        "role": role,
        "module": str_field(d, "module", required=False, max_len=256),
        "worktree": str_field(d, "worktree", required=False, max_len=1024),
        "display": str_field(d, "display", required=False, max_len=256),
        "public_key": str_field(d, "public_key", required=False, max_len=64),
        **invite_field(d),
    }


def _n_agent_update(d: Raw) -> Raw:
    ctx = d.get("work_contexts") or []
    if not isinstance(ctx, list) or not all(isinstance(c, dict) for c in ctx):
        fail("work_contexts", "must be a list of objects")
    return {"agent_id": agent_field(d), "work_contexts": ctx}


def _n_agent_heartbeat(d: Raw) -> Raw:
    return {"agent_id": agent_field(d)}


def _n_agent_cleanup(d: Raw) -> Raw:
    return {
        "agent_id": agent_field(d),
        "reason": str_field(d, "reason", required=False, max_len=1024),
        "method": choice_field(d, "method", CLEANUP_METHODS, "manual"),
        "by": agent_field(d, "by") if d.get("by") else "",  # who removed the agent (its signer)
    }


def _n_session_start(d: Raw) -> Raw:
    return {
        "session_id": str_field(d, "session_id", pattern=SESSION_ID_RE),
        "agent_id": agent_field(d),
    }


def _n_session_end(d: Raw) -> Raw:
    agent = d.get("agent_id")
    return {
        "session_id": str_field(d, "session_id", pattern=SESSION_ID_RE),
        "agent_id": agent_field(d) if agent else "",
        "reason": choice_field(d, "reason", END_REASONS, "normal"),
    }


def _n_group_create(d: Raw) -> Raw:
    return {
        "group_id": str_field(d, "group_id", pattern=GROUP_ID_RE),
        "name": _group_name(d),
        "description": str_field(d, "description", required=False, max_len=1024),
        "created_by": agent_field(d, "created_by"),
    }


def _group_name(d: Raw, key: str = "name") -> str:
    value = d.get(key)
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        fail(key, f"invalid group name {str(value)[:80]!r}: use lowercase letters, digits and _")
    if value == "everyone":
        fail(key, "'everyone' is built in")
    return value


def _n_group_delete(d: Raw) -> Raw:
    return {"name": _group_name(d), "deleted_by": agent_field(d, "deleted_by")}


def _n_group_member(d: Raw) -> Raw:
    mtype = choice_field(d, "member_type", MEMBER_TYPES, "agent")
    value = d.get("member_value")
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        fail("member_value", f"invalid {mtype} name {str(value)[:80]!r}")
    return {"group": _group_name(d, "group"), "member_type": mtype, "member_value": value, "agent_id": agent_field(d)}


def _n_receipt(d: Raw) -> Raw:
    return {
        "agent_id": agent_field(d),
        "session_id": str_field(d, "session_id", required=False, pattern=SESSION_ID_RE),
        "message_ids": id_list(d),
    }


def _n_surfaced(d: Raw) -> Raw:
    out = _n_receipt(d)
    via = str_field(d, "via", required=False, max_len=MAX_VIA_CHARS)
    if via:
        out["via"] = via
    return out


NORMALISERS: dict[str, Callable[[Raw], Raw]] = {
    "message.create": _n_message_create,
    "message.edit": _n_message_edit,
    "message.delete": _n_message_delete,
    "thread.create": _n_thread_create,
    "agent.register": _n_agent_register,
    "agent.update": _n_agent_update,
    "agent.heartbeat": _n_agent_heartbeat,
    "agent.cleanup": _n_agent_cleanup,
    "agent.session.start": _n_session_start,
    "agent.session.end": _n_session_end,
    "agent.admit": n_agent_admit,
    "agent.rotate": n_agent_rotate,
    "agent.revoke": n_agent_revoke,
    "group.create": _n_group_create,
    "group.delete": _n_group_delete,
    "group.member.add": _n_group_member,
    "group.member.remove": _n_group_member,
    "message.read": _n_receipt,
    "message.unread": _n_receipt,
    "message.archive": _n_receipt,
    "message.delivered": _n_receipt,
    "message.surfaced": _n_surfaced,
    "message.acked": _n_receipt,
}

EVENT_TYPES = tuple(NORMALISERS)


def normalise(d: Any) -> Raw:
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
        fail("type", "is required")
    event_id = d.get("event_id")
    if not isinstance(event_id, str) or not ULID_RE.fullmatch(event_id):
        fail("event_id", f"must be a ULID (got {str(event_id)[:40]!r})")
    ts = d.get("timestamp")
    if not is_valid_timestamp(ts):
        fail("timestamp", f"must be an RFC 3339 UTC time between {MIN_YEAR} and {MAX_YEAR} (got {str(ts)[:40]!r})")
    v = d.get("v", EVENT_VERSION)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        fail("v", "must be a positive integer")
    handler = NORMALISERS.get(etype)
    if handler is None or v > EVENT_VERSION:
        return d  # preserved as-is
    out = {"type": etype, "timestamp": ts, "event_id": event_id, "v": v}
    out.update(handler(d))
    chain = d.get("chain")
    if chain is not None:  # the signer's sequence number and previous event (thrum.trust.chains)
        out["chain"] = chain_field(chain)
    sig = d.get("sig")
    if sig is not None:  # kept as written: thrum.trust judges it
        out["sig"] = sig
    return out


def is_known(d: Raw) -> bool:
    """True for a type and version this build validates (and folds)."""
    return d.get("type") in NORMALISERS and d.get("v", 1) <= EVENT_VERSION

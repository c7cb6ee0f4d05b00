"""message.send, message.edit, message.delete: the writes of messages, with the body rules every front end gets.

The reads are `message_queries`, the read/unread/archive marks `receipts`, the
ids callers give `message_ids`. With an ``idempotency_key`` a repeated send or
edit returns the first one's result (`thrum.daemon.idempotency`).
"""

from __future__ import annotations

from typing import Any

from ... import errors, safejson
from ... import events as ev
from ...store import idempotency as idem
from ...store import queries
from ..dispatch import Call, method
from ..idempotency import key_param
from .message_ids import complete_thread_id, require_message


# ---------------------------------------------------------------------------- helpers


def _check_body_size(call: Call, content: str, field: str = "content") -> None:
    limit = int(call.ctx.config.max_body_bytes)
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise errors.ValidationError(
            f"invalid params: message body is {size} bytes; the limit is {limit} bytes "
            f"(max_body_bytes in .thrum/config.json)",
            field=field,
        )


def _structured(call: Call) -> str:
    value = call.params.any("structured")
    if value is None or value == "":
        return ""
    if isinstance(value, (dict, list)):
        try:
            value = ev.dumps(value).decode()
        except (TypeError, ValueError, RecursionError):  # orjson refuses over 254 levels
            value = "[" * (safejson.MAX_DEPTH + 1)  # judged (and refused) below like any too-deep text
    if isinstance(value, str):
        try:
            safejson.loads(value)
        except ValueError as exc:
            raise errors.ValidationError(
                f"invalid params: structured is not valid JSON ({exc})", field="structured"
            ) from None
        return value
    raise errors.ValidationError("invalid params: structured must be a JSON string or object", field="structured")


def _check_content(call: Call, content: str, fmt: str, structured: str, field: str = "content") -> None:
    """The body rules every front end gets: not empty (unless a structured payload
    carries the message, or the caller says ``allow_empty`` — mail systems such as
    Gas City's deliver empty mail), within the size limit, and JSON when the format says so."""
    if not content.strip() and not structured and not call.params.bool("allow_empty"):
        raise errors.ValidationError(f"invalid params: {field} is empty; nothing was stored", field=field)
    _check_body_size(call, content, field)
    if fmt == "json":
        try:
            safejson.loads(content)
        except ValueError as exc:
            raise errors.ValidationError(
                f"invalid params: {field} is not valid JSON ({exc}) but format is json", field=field
            ) from None


# ---------------------------------------------------------------------------- send


@method("message.send")
async def send(call: Call) -> dict[str, Any]:
    """Send a message; with ``idempotency_key``, a repeat returns the first send's result."""
    p = call.params
    caller = await call.ctx.agents.caller(p)
    content = p.str("content", required=True)
    key = key_param(p)
    if key is None:
        return await _send(call, caller, content, None)

    async def lookup() -> dict[str, Any] | None:
        found = await call.ctx.store.read(idem.lookup, caller, key)
        if found is None or found["kind"] != "message.create":
            return found and {"digest": "", "result": {}}  # the key named an edit: never this send
        reply_to, recipients = await _replayed_recipients(call, caller)
        result = {
            "message_id": found["message_id"],
            "thread_id": found["thread_id"],
            "created_at": found["created_at"],
            "session_id": found["session_id"],
            "reply_to": reply_to,
            "recipients": recipients,
        }
        note = pending_note(recipients)
        if note:
            result["note"] = note
        return {"digest": found["digest"], "result": result}

    return await call.ctx.keyed.once(
        caller, key, idem.content_digest(content), lookup=lookup, write=lambda: _send(call, caller, content, key)
    )


def _recipients(resolved: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answer's ``recipients``: a role nobody holds yet has ``pending`` set."""
    return [
        {"address": r["address"], "kind": r["kind"], **({"pending": True} if r.get("pending") else {})}
        for r in resolved
    ]


def pending_note(resolved: list[dict[str, Any]]) -> str | None:
    """The one line a sender gets when a role it addressed has no holder yet."""
    roles = [r["address"] for r in resolved if r.get("pending")]
    if not roles:
        return None
    where = (
        " here (the fetch from the remote did not finish in time)" if any(r.get("unchecked") for r in resolved) else ""
    )
    if len(roles) == 1:
        return f"nobody holds the role {roles[0]}{where} yet; the message waits for its first holder"
    return f"nobody holds the roles {', '.join(roles)}{where} yet; the message waits for their first holders"


def _with_parent_author(addresses: list[str], parent: dict[str, Any], caller: str) -> list[str]:
    """A reply reaches the one asked: it mentions the parent's author (as an address, so the
    answer lists it), after any explicit --to/--mention."""
    if parent["agent_id"] != caller and parent["agent_id"] not in [a.lstrip("@") for a in addresses]:
        return addresses + [parent["agent_id"]]
    return addresses


GC_ROLE = "gc"  # agents that act for a Gas City mailbox on one machine (thrum.gcmail.addresses)


async def _reply_addresses(
    call: Call, addresses: list[str], reply_to: str, parent: dict[str, Any], caller: str
) -> list[str]:
    """A reply's addresses: its own when it names any, else the parent's (a follow-up to
    "PR ready -> @reviewer" reaches the reviewers); then the parent's author, when it
    still exists. Inherited addresses that no longer resolve (a deleted agent) are left out.
    Gas City mail (either side a mailbox's agent) answers the sender only, as the exec
    spec's reply rule says: nothing is inherited, and the sender is its mailbox
    (`_parent_mailbox`)."""
    author = await call.ctx.agents.get(parent["agent_id"])
    me = await call.ctx.agents.get(caller)
    mail = (author is not None and _parent_mailbox(author) is not None) or (me is not None and _parent_mailbox(me))
    if not addresses and not mail:
        inherited = [a for a in await call.ctx.store.read(queries.mention_values, reply_to) if a != caller]
        for a in inherited:
            try:
                await call.ctx.addresses.resolve([a])
            except errors.ThrumError:
                continue
            addresses.append(a)
    if author is not None and _parent_mailbox(author) is None:
        addresses = _with_parent_author(addresses, parent, caller)
    return addresses


def _parent_mailbox(author: dict[str, Any]) -> str | None:
    """The Gas City mailbox a parent's author acts for (its module), or None.

    Mail from a Gas City agent is written by that mailbox's agent on the sender's
    machine (``gcr_…``); the exec spec's reply rule addresses the reply to the
    *sender*, so it mentions the mailbox (what ``inbox``, ``check`` and ``count`` read
    on every machine), never the per-machine agent (issue 30, item 9)."""
    if author.get("role") == GC_ROLE and author.get("module"):
        return str(author["module"])
    return None


async def _reply_mailbox(call: Call, parent: dict[str, Any], caller: str) -> str | None:
    author = await call.ctx.agents.get(parent["agent_id"])
    return _parent_mailbox(author) if author is not None and parent["agent_id"] != caller else None


async def _replayed_recipients(call: Call, caller: str) -> tuple[str, list[dict[str, Any]]]:
    """``reply_to`` and ``recipients`` of a send being replayed, worked out as the first time."""
    p = call.params
    addresses = p.str_list("to", max_items=256) + p.str_list("mentions", max_items=256)
    reply_to = ""
    try:
        if p.str("reply_to"):
            reply_to, parent = await require_message(call, "reply_to")
            addresses = await _reply_addresses(call, addresses, reply_to, parent, caller)
        return reply_to, _recipients(await call.ctx.addresses.resolve(addresses)) if addresses else []
    except errors.ThrumError:  # a recipient or the parent gone since: the message went out all the same
        return reply_to, []


async def _send(call: Call, caller: str, content: str, key: str | None) -> dict[str, Any]:
    p = call.params
    fmt = p.str("format", default="markdown", choices=ev.FORMATS)
    priority = p.str("priority", default="normal", choices=ev.PRIORITIES)
    structured = _structured(call)
    _check_content(call, content, fmt, structured)
    addresses = p.str_list("to", max_items=256) + p.str_list("mentions", max_items=256)
    scopes = p.tags("scopes")
    refs = p.tags("refs")
    subject = p.str("subject", default="", max_len=ev.MAX_SUBJECT_CHARS)
    ack_within = p.int("ack_within", default=0, minimum=1, maximum=ev.MAX_ACK_WITHIN)
    ack = p.bool("ack") or bool(ack_within)  # a deadline asks for an ack
    thread_id = await complete_thread_id(call)
    reply_to = None
    mailbox = None
    if p.str("reply_to"):
        reply_to, parent = await require_message(call, "reply_to")
        if parent["deleted"]:
            raise errors.Conflict(
                f"message {reply_to} is deleted; a reply to it would reach no one", data={"field": "reply_to"}
            )
        thread_id = thread_id or parent["thread_id"] or ""
        refs.append({"type": "reply_to", "value": reply_to})
        addresses = await _reply_addresses(call, addresses, reply_to, parent, caller)
        mailbox = await _reply_mailbox(call, parent, caller)
    recipients = await call.ctx.addresses.resolve(addresses) if addresses else []
    for r in recipients:
        refs.append({"type": "mention", "value": r["value"]})
    if reply_to and mailbox and not any(r["type"] == "mention" and r["value"] == mailbox for r in refs):
        refs.append({"type": "mention", "value": mailbox})
        recipients.append({"address": mailbox, "kind": "mailbox", "value": mailbox})
    session_id = await call.ctx.sessions.ensure(caller, p.str("session_id"))
    event = ev.MessageCreate(
        message_id=call.ctx.keys.new_message_id(caller),  # bound to the caller's key: nobody else can take it
        agent_id=caller,
        session_id=session_id,
        thread_id=thread_id or ev.new_id("thr"),
        body=ev.Body(content=content, format=fmt, structured=structured),
        scopes=tuple(ev.Tag(s["type"], s["value"]) for s in scopes),
        refs=tuple(ev.Tag(r["type"], r["value"]) for r in refs),
        priority=priority,
        subject=subject,
        idempotency_key=key or "",
        ack=ack,
        ack_within=ack_within or 0,
    )
    await call.ctx.store.write([event])
    result = {
        "message_id": event.message_id,
        "thread_id": event.thread_id,
        "created_at": event.timestamp,
        "session_id": session_id,
        "reply_to": reply_to or "",
        "recipients": _recipients(recipients),
    }
    note = pending_note(recipients)
    if note:
        result["note"] = note
    return result


# ---------------------------------------------------------------------------- edit / delete


@method("message.edit")
async def edit(call: Call) -> dict[str, Any]:
    """Edit a message; with ``idempotency_key``, a repeat returns the first edit's result."""
    p = call.params
    caller = await call.ctx.agents.caller(p)
    mid, info = await require_message(call)
    content = p.str("content", required=True)
    key = key_param(p)
    if key is None:
        return await _edit(call, caller, mid, info, content, None)

    async def lookup() -> dict[str, Any] | None:
        found = await call.ctx.store.read(idem.lookup, caller, key)
        if found is None:
            return None
        if found["kind"] != "message.edit" or found["message_id"] != mid:
            return {"digest": "", "result": {}}  # the key named another write: a conflict
        return {
            "digest": found["digest"],
            "result": {"message_id": mid, "version": found["version"], "updated_at": found["updated_at"]},
        }

    return await call.ctx.keyed.once(
        caller,
        key,
        idem.content_digest(content),
        lookup=lookup,
        write=lambda: _edit(call, caller, mid, info, content, key),
        what="edit",
    )


async def _edit(
    call: Call, caller: str, mid: str, info: dict[str, Any], content: str, key: str | None
) -> dict[str, Any]:
    p = call.params
    if info["agent_id"] != caller:
        raise errors.Forbidden(f"only the author (@{info['agent_id']}) can edit {mid}")
    if info["deleted"]:
        raise errors.Conflict(f"message {mid} is deleted and cannot be edited")
    current = (await call.ctx.store.read(queries.get_message, mid))["message"]
    fmt = p.str("format", default=current["body"]["format"], choices=ev.FORMATS)
    structured = _structured(call) if "structured" in p else current["body"].get("structured", "")
    _check_content(call, content, fmt, structured)
    session_id = await call.ctx.sessions.ensure(caller, p.str("session_id"))
    event = ev.MessageEdit(
        message_id=mid,
        agent_id=caller,
        session_id=session_id,
        body=ev.Body(content=content, format=fmt, structured=structured),
        idempotency_key=key or "",
    )
    await call.ctx.store.write([event])
    after = (await call.ctx.store.read(queries.get_message, mid))["message"]
    return {"message_id": mid, "version": after["version"], "updated_at": after["updated_at"]}


@method("message.delete")
async def delete(call: Call) -> dict[str, Any]:
    p = call.params
    caller = await call.ctx.agents.caller(p)
    mid, info = await require_message(call)
    if info["agent_id"] != caller:
        raise errors.Forbidden(f"only the author (@{info['agent_id']}) can delete {mid}")
    if info["deleted"]:
        raise errors.Conflict(f"message {mid} is already deleted")
    session_id = await call.ctx.sessions.ensure(caller, p.str("session_id"))
    event = ev.MessageDelete(
        message_id=mid, agent_id=caller, session_id=session_id, reason=p.str("reason", default="", max_len=1024)
    )
    await call.ctx.store.write([event])
    return {"message_id": mid, "deleted": True, "deleted_at": event.timestamp}


# ---------------------------------------------------------------------------- thread.create


@method("thread.create")
async def thread_create(call: Call) -> dict[str, Any]:
    """Start a thread with a title before its first message (spec/events.md, thread.create);
    messages join it with ``thread_id``. A message sent without one still starts its own."""
    p = call.params
    caller = await call.ctx.agents.caller(p)
    title = p.str("title", required=True, max_len=ev.MAX_SUBJECT_CHARS)
    if not title.strip():
        raise errors.ValidationError("invalid params: title must not be empty", field="title")
    event = ev.ThreadCreate(title=title, created_by=caller)
    await call.ctx.store.write([event])
    return {"thread_id": event.thread_id, "title": title, "created_by": caller, "created_at": event.timestamp}

"""message.* methods: send, list, get, edit, delete and the read/unread/archive marks."""

from __future__ import annotations

from ... import errors, safejson
from ... import events as ev
from ...store import idempotency as idem
from ...store import queries
from ..dispatch import Call, method
from ..idempotency import key_param


# ---------------------------------------------------------------------------- helpers

def _check_body_size(call: Call, content: str, field: str = "content") -> None:
    limit = int(call.ctx.config.max_body_bytes)
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise errors.ValidationError(
            f"invalid params: message body is {size} bytes; the limit is {limit} bytes "
            f"(max_body_bytes in .thrum/config.json)", field=field)


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
            raise errors.ValidationError(f"invalid params: structured is not valid JSON ({exc})",
                                         field="structured") from None
        return value
    raise errors.ValidationError("invalid params: structured must be a JSON string or object", field="structured")


async def _require_messages(call: Call, ids: list[str]) -> dict[str, dict]:
    for mid in ids:
        if not ev.MESSAGE_ID_RE.fullmatch(mid):
            raise errors.ValidationError(f"invalid params: {mid[:80]!r} is not a message id", field="message_ids")
    found = await call.ctx.read(queries.message_heads, ids)
    missing = [m for m in ids if m not in found]
    if missing:
        raise errors.NotFound(f"message{'s' if len(missing) > 1 else ''} not found: {', '.join(missing[:10])}",
                              data={"missing": missing})
    return found


async def _require_message(call: Call, key: str = "message_id") -> tuple[str, dict]:
    mid = call.params.str(key, required=True)
    if not ev.MESSAGE_ID_RE.fullmatch(mid):
        raise errors.ValidationError(f"invalid params: {key} {mid[:80]!r} is not a message id", field=key)
    found = await call.ctx.read(queries.message_heads, [mid])
    if mid not in found:
        raise errors.NotFound(f"message {mid} not found")
    return mid, found[mid]


# ---------------------------------------------------------------------------- send

@method("message.send")
async def send(call: Call) -> dict:
    """Send a message; with ``idempotency_key``, a repeat returns the first send's result."""
    p = call.params
    caller = await call.ctx.caller(p)
    content = p.str("content", required=True)
    _check_body_size(call, content)
    key = key_param(p)
    if key is None:
        return await _send(call, caller, content, None)

    async def lookup():
        found = await call.ctx.read(idem.lookup, caller, key)
        if found is None or found["kind"] != "message.create":
            return found and {"digest": "", "result": {}}  # the key named an edit: never this send
        recipients = []
        addresses = p.str_list("to", max_items=256) + p.str_list("mentions", max_items=256)
        if addresses:
            try:
                recipients = _recipients(await call.ctx.resolve_addresses(addresses))
            except errors.ThrumError:
                pass  # a recipient gone since: the message went out all the same
        return {"digest": found["digest"], "result": {
            "message_id": found["message_id"], "thread_id": found["thread_id"], "created_at": found["created_at"],
            "session_id": found["session_id"], "reply_to": p.str("reply_to") or "", "recipients": recipients}}

    return await call.ctx.keyed.once(caller, key, idem.content_digest(content), lookup=lookup,
                                     write=lambda: _send(call, caller, content, key))


def _recipients(resolved: list[dict]) -> list[dict]:
    return [{"address": r["address"], "kind": r["kind"]} for r in resolved]


async def _send(call: Call, caller: str, content: str, key: str | None) -> dict:
    p = call.params
    fmt = p.str("format", default="markdown", choices=ev.FORMATS)
    priority = p.str("priority", default="normal", choices=ev.PRIORITIES)
    structured = _structured(call)
    addresses = p.str_list("to", max_items=256) + p.str_list("mentions", max_items=256)
    scopes = p.tags("scopes")
    refs = p.tags("refs")
    reply_to = p.str("reply_to")
    thread_id = p.str("thread_id")
    if thread_id and not ev.THREAD_ID_RE.fullmatch(thread_id):
        raise errors.ValidationError(f"invalid params: thread_id {thread_id[:60]!r} is not a thread id",
                                     field="thread_id")
    recipients = await call.ctx.resolve_addresses(addresses) if addresses else []
    if reply_to:
        parent_id, parent = await _require_message(call, "reply_to")
        thread_id = thread_id or parent["thread_id"] or ""
        refs.append({"type": "reply_to", "value": parent_id})
    for r in recipients:
        refs.append({"type": "mention", "value": r["value"]})
    session_id = await call.ctx.ensure_session(caller, p.str("session_id"))
    event = ev.MessageCreate(
        message_id=call.ctx.new_message_id(caller),  # bound to the caller's key: nobody else can take it
        agent_id=caller, session_id=session_id,
        thread_id=thread_id or ev.new_id("thr"),
        body=ev.Body(content=content, format=fmt, structured=structured),
        scopes=tuple(ev.Tag(s["type"], s["value"]) for s in scopes),
        refs=tuple(ev.Tag(r["type"], r["value"]) for r in refs),
        priority=priority,
        idempotency_key=key or "",
    )
    await call.ctx.write([event])
    return {"message_id": event.message_id, "thread_id": event.thread_id, "created_at": event.timestamp,
            "session_id": session_id, "reply_to": reply_to or "", "recipients": _recipients(recipients)}


# ---------------------------------------------------------------------------- queries

async def _optional_caller(call: Call) -> str | None:
    return await call.ctx.caller(call.params) if "caller" in call.params else None


def _need_caller(caller, what: str):
    if caller is None:
        raise errors.ValidationError(f"invalid params: {what} needs caller (the agent whose inbox this is)",
                                     field="caller")


@method("message.list")
async def list_messages(call: Call) -> dict:
    p = call.params
    caller = await _optional_caller(call)
    mentions = p.bool("mentions")
    unread = p.bool("unread")
    exclude_own = p.bool("exclude_own")
    if mentions:
        _need_caller(caller, "mentions")
    if unread:
        _need_caller(caller, "unread")
    if exclude_own:
        _need_caller(caller, "exclude_own")
    unread_for = p.str("unread_for_agent") or (caller if unread else None)
    return await call.ctx.read(
        queries.list_messages,
        viewer=caller or p.str("unread_for_agent"),
        author_id=p.str("author_id"),
        exclude_author=caller if exclude_own else None,
        scope=p.tag("scope"),
        ref=p.tag("ref"),
        mentions_of=caller if mentions else None,
        mention_role=p.str("mention_role"),
        unread_for=unread_for,
        thread_id=p.str("thread_id"),
        include_deleted=p.bool("include_deleted"),
        include_archived=p.bool("include_archived"),
        page=p.int("page", default=1),
        page_size=p.int("page_size", default=10),
        sort_by=p.str("sort_by", default="created_at"),
        sort_order=p.str("sort_order", default="desc"),
    )


@method("message.get")
async def get(call: Call) -> dict:
    caller = await _optional_caller(call)
    mid = call.params.str("message_id", required=True)
    return await call.ctx.read(queries.get_message, mid, viewer=caller)


@method("message.sent")
async def sent(call: Call) -> dict:
    p = call.params
    caller = await call.ctx.caller(p)
    return await call.ctx.read(queries.sent_messages, caller, page=p.int("page", default=1),
                                 page_size=p.int("page_size", default=10))


@method("message.thread")
async def thread(call: Call) -> dict:
    p = call.params
    caller = await _optional_caller(call)
    key = p.str("thread_id") or p.str("message_id")
    if not key:
        raise errors.ValidationError("invalid params: thread_id or message_id is required", field="thread_id")
    messages = await call.ctx.read(queries.thread_messages, key, viewer=caller)
    return {"thread_id": messages[0]["thread_id"] if messages else key, "messages": messages}


@method("message.counts")
async def counts(call: Call) -> dict:
    caller = await call.ctx.caller(call.params)
    return await call.ctx.read(queries.counts, caller, mentions_only=call.params.bool("mentions"))


# ---------------------------------------------------------------------------- edit / delete

@method("message.edit")
async def edit(call: Call) -> dict:
    """Edit a message; with ``idempotency_key``, a repeat returns the first edit's result."""
    p = call.params
    caller = await call.ctx.caller(p)
    mid, info = await _require_message(call)
    content = p.str("content", required=True)
    _check_body_size(call, content)
    key = key_param(p)
    if key is None:
        return await _edit(call, caller, mid, info, content, None)

    async def lookup():
        found = await call.ctx.read(idem.lookup, caller, key)
        if found is None:
            return None
        if found["kind"] != "message.edit" or found["message_id"] != mid:
            return {"digest": "", "result": {}}  # the key named another write: a conflict
        return {"digest": found["digest"], "result": {
            "message_id": mid, "version": found["version"], "updated_at": found["updated_at"]}}

    return await call.ctx.keyed.once(caller, key, idem.content_digest(content), lookup=lookup,
                                     write=lambda: _edit(call, caller, mid, info, content, key), what="edit")


async def _edit(call: Call, caller: str, mid: str, info: dict, content: str, key: str | None) -> dict:
    p = call.params
    if info["agent_id"] != caller:
        raise errors.Forbidden(f"only the author (@{info['agent_id']}) can edit {mid}")
    if info["deleted"]:
        raise errors.Conflict(f"message {mid} is deleted and cannot be edited")
    current = (await call.ctx.read(queries.get_message, mid))["message"]
    fmt = p.str("format", default=current["body"]["format"], choices=ev.FORMATS)
    structured = _structured(call) if "structured" in p else current["body"].get("structured", "")
    session_id = await call.ctx.ensure_session(caller, p.str("session_id"))
    event = ev.MessageEdit(message_id=mid, agent_id=caller, session_id=session_id,
                           body=ev.Body(content=content, format=fmt, structured=structured),
                           idempotency_key=key or "")
    await call.ctx.write([event])
    after = (await call.ctx.read(queries.get_message, mid))["message"]
    return {"message_id": mid, "version": after["version"], "updated_at": after["updated_at"]}


@method("message.delete")
async def delete(call: Call) -> dict:
    p = call.params
    caller = await call.ctx.caller(p)
    mid, info = await _require_message(call)
    if info["agent_id"] != caller:
        raise errors.Forbidden(f"only the author (@{info['agent_id']}) can delete {mid}")
    if info["deleted"]:
        raise errors.Conflict(f"message {mid} is already deleted")
    session_id = await call.ctx.ensure_session(caller, p.str("session_id"))
    event = ev.MessageDelete(message_id=mid, agent_id=caller, session_id=session_id,
                             reason=p.str("reason", default="", max_len=1024))
    await call.ctx.write([event])
    return {"message_id": mid, "deleted": True, "deleted_at": event.timestamp}


# ---------------------------------------------------------------------------- receipts

async def _write_receipts(call: Call, cls, caller: str, ids: list[str]) -> None:
    """One receipt event per 1,000 ids (one log line each; a line stays a sane size)."""
    session_id = await call.ctx.ensure_session(caller, call.params.str("session_id"))
    await call.ctx.write([cls(agent_id=caller, session_id=session_id, message_ids=tuple(ids[i:i + 1000]))
                            for i in range(0, len(ids), 1000)])


@method("message.markRead")
async def mark_read(call: Call) -> dict:
    p = call.params
    caller = await call.ctx.caller(p)
    if p.bool("all"):
        ids = await call.ctx.read(queries.unread_ids, caller, mentions_only=p.bool("mentions"),
                                    scope=p.tag("scope"))
    else:
        ids = list(dict.fromkeys(p.str_list("message_ids", required=True)))
        await _require_messages(call, ids)
    if not ids:
        return {"marked_count": 0}
    flags = await call.ctx.read(queries.read_flags, caller, ids)
    todo = [m for m in ids if not flags.get(m)]
    if todo:
        await _write_receipts(call, ev.MessageRead, caller, todo)
    result = {"marked_count": len(ids)}
    also = await call.ctx.read(queries.also_read_by, ids, caller)
    if also:
        result["also_read_by"] = also
    return result


@method("message.markUnread")
async def mark_unread(call: Call) -> dict:
    p = call.params
    caller = await call.ctx.caller(p)
    ids = list(dict.fromkeys(p.str_list("message_ids", required=True)))
    await _require_messages(call, ids)
    await _write_receipts(call, ev.MessageUnread, caller, ids)
    return {"marked_count": len(ids)}


@method("message.archive")
async def archive(call: Call) -> dict:
    p = call.params
    caller = await call.ctx.caller(p)
    ids = list(dict.fromkeys(p.str_list("message_ids", required=True)))
    await _require_messages(call, ids)
    already = await call.ctx.read(queries.archived_ids, caller, ids)
    todo = [m for m in ids if m not in already]
    if not todo:
        raise errors.Conflict(f"already archived: {', '.join(ids[:10])}", data={"already_archived": ids})
    await _write_receipts(call, ev.MessageArchive, caller, todo)
    return {"archived_count": len(todo), "already_archived": sorted(already)}

"""message.* methods: send, list, get, edit, delete and the read/unread/archive marks."""

from __future__ import annotations

import re

from ... import errors, safejson
from ... import events as ev
from ...store import idempotency as idem
from ...store import prefixes, queries
from ..dispatch import Call, method
from ..idempotency import key_param

# what an id (or a unique prefix of one, with or without its ``msg_`` head) may look like
_ID_TEXT = re.compile(r"[0-9A-Za-z_\-]{1,84}")


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


def _id_texts(values: list[str], field: str) -> list[str]:
    for v in values:
        if not _ID_TEXT.fullmatch(v):
            raise errors.ValidationError(f"invalid params: {v[:80]!r} is not a message id", field=field)
    return values


async def _require_messages(call: Call, ids: list[str], field: str = "message_ids") -> tuple[list[str], dict]:
    """Full ids (unique prefixes completed, duplicates dropped) and their heads.

    Raises:
        NotFound: an id names no message; ValidationError: a prefix is ambiguous.
    """
    full = list(
        dict.fromkeys(await call.ctx.read(prefixes.complete_ids, "message", _id_texts(ids, field), field=field))
    )
    return full, await call.ctx.read(queries.message_heads, full)


async def _require_message(call: Call, key: str = "message_id") -> tuple[str, dict]:
    mid = call.params.str(key, required=True)
    full, heads = await _require_messages(call, [mid], key)
    return full[0], heads[full[0]]


async def _thread_id(call: Call) -> str | None:
    """``thread_id`` completed from a unique prefix; an unknown full thread id starts that thread."""
    thread_id = call.params.str("thread_id")
    if not thread_id:
        return None
    if not _ID_TEXT.fullmatch(thread_id):
        raise errors.ValidationError(
            f"invalid params: thread_id {thread_id[:60]!r} is not a thread id", field="thread_id"
        )
    try:
        return await call.ctx.read(prefixes.complete_id, "thread", thread_id, field="thread_id")
    except errors.NotFound:
        if ev.THREAD_ID_RE.fullmatch(thread_id):
            return thread_id
        raise


# ---------------------------------------------------------------------------- send


@method("message.send")
async def send(call: Call) -> dict:
    """Send a message; with ``idempotency_key``, a repeat returns the first send's result."""
    p = call.params
    caller = await call.ctx.caller(p)
    content = p.str("content", required=True)
    key = key_param(p)
    if key is None:
        return await _send(call, caller, content, None)

    async def lookup():
        found = await call.ctx.read(idem.lookup, caller, key)
        if found is None or found["kind"] != "message.create":
            return found and {"digest": "", "result": {}}  # the key named an edit: never this send
        reply_to, recipients = await _replayed_recipients(call, caller)
        return {
            "digest": found["digest"],
            "result": {
                "message_id": found["message_id"],
                "thread_id": found["thread_id"],
                "created_at": found["created_at"],
                "session_id": found["session_id"],
                "reply_to": reply_to,
                "recipients": recipients,
            },
        }

    return await call.ctx.keyed.once(
        caller, key, idem.content_digest(content), lookup=lookup, write=lambda: _send(call, caller, content, key)
    )


def _recipients(resolved: list[dict]) -> list[dict]:
    return [{"address": r["address"], "kind": r["kind"]} for r in resolved]


def _with_parent_author(addresses: list[str], parent: dict, caller: str) -> list[str]:
    """A reply reaches the one asked: it mentions the parent's author (as an address, so the
    answer lists it), after any explicit --to/--mention."""
    if parent["agent_id"] != caller and parent["agent_id"] not in [a.lstrip("@") for a in addresses]:
        return addresses + [parent["agent_id"]]
    return addresses


async def _replayed_recipients(call: Call, caller: str) -> tuple[str, list[dict]]:
    """``reply_to`` and ``recipients`` of a send being replayed, worked out as the first time."""
    p = call.params
    addresses = p.str_list("to", max_items=256) + p.str_list("mentions", max_items=256)
    reply_to = ""
    try:
        if p.str("reply_to"):
            reply_to, parent = await _require_message(call, "reply_to")
            if await call.ctx.agent(parent["agent_id"]) is not None:
                addresses = _with_parent_author(addresses, parent, caller)
        return reply_to, _recipients(await call.ctx.resolve_addresses(addresses)) if addresses else []
    except errors.ThrumError:  # a recipient or the parent gone since: the message went out all the same
        return reply_to, []


async def _send(call: Call, caller: str, content: str, key: str | None) -> dict:
    p = call.params
    fmt = p.str("format", default="markdown", choices=ev.FORMATS)
    priority = p.str("priority", default="normal", choices=ev.PRIORITIES)
    structured = _structured(call)
    _check_content(call, content, fmt, structured)
    addresses = p.str_list("to", max_items=256) + p.str_list("mentions", max_items=256)
    scopes = p.tags("scopes")
    refs = p.tags("refs")
    subject = p.str("subject", default="", max_len=ev.MAX_SUBJECT_CHARS)
    thread_id = await _thread_id(call)
    reply_to = None
    if p.str("reply_to"):
        reply_to, parent = await _require_message(call, "reply_to")
        if parent["deleted"]:
            raise errors.Conflict(
                f"message {reply_to} is deleted; a reply to it would reach no one", data={"field": "reply_to"}
            )
        thread_id = thread_id or parent["thread_id"] or ""
        refs.append({"type": "reply_to", "value": reply_to})
        if await call.ctx.agent(parent["agent_id"]) is not None:
            addresses = _with_parent_author(addresses, parent, caller)
    recipients = await call.ctx.resolve_addresses(addresses) if addresses else []
    for r in recipients:
        refs.append({"type": "mention", "value": r["value"]})
    session_id = await call.ctx.ensure_session(caller, p.str("session_id"))
    event = ev.MessageCreate(
        message_id=call.ctx.new_message_id(caller),  # bound to the caller's key: nobody else can take it
        agent_id=caller,
        session_id=session_id,
        thread_id=thread_id or ev.new_id("thr"),
        body=ev.Body(content=content, format=fmt, structured=structured),
        scopes=tuple(ev.Tag(s["type"], s["value"]) for s in scopes),
        refs=tuple(ev.Tag(r["type"], r["value"]) for r in refs),
        priority=priority,
        subject=subject,
        idempotency_key=key or "",
    )
    await call.ctx.write([event])
    return {
        "message_id": event.message_id,
        "thread_id": event.thread_id,
        "created_at": event.timestamp,
        "session_id": session_id,
        "reply_to": reply_to or "",
        "recipients": _recipients(recipients),
    }


# ---------------------------------------------------------------------------- queries


async def _optional_caller(call: Call) -> str | None:
    return await call.ctx.caller(call.params) if "caller" in call.params else None


@method("message.list")
async def list_messages(call: Call) -> dict:
    p = call.params
    mentions = p.bool("mentions")
    unread = p.bool("unread")
    exclude_own = p.bool("exclude_own")
    # the config-resolved filters act for the caller: without one, the repository's
    # single identity (as in the CLI), else an error naming the param
    caller = (
        await call.ctx.caller(p)
        if (mentions or unread or exclude_own or p.bool("archived_only"))
        else await _optional_caller(call)
    )
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
        thread_id=await _thread_id(call),
        include_deleted=p.bool("include_deleted"),
        include_archived=p.bool("include_archived"),
        archived_only=p.bool("archived_only"),
        page=p.int("page", default=1),
        page_size=p.int("page_size", default=10),
        sort_by=p.str("sort_by", default="created_at"),
        sort_order=p.str("sort_order", default="desc"),
    )


async def _with_mailbox_state(call: Call, messages: list[dict]) -> None:
    """With ``mailbox_state``: each message gets ``mailbox: {read, archived}`` (thrum.store.mailboxes)."""
    if call.params.bool("mailbox_state") and messages:
        states = await call.ctx.read(queries.mailbox_states, [m["message_id"] for m in messages])
        for m in messages:
            m["mailbox"] = states.get(m["message_id"], {"read": False, "archived": False})


@method("message.get")
async def get(call: Call) -> dict:
    caller = await _optional_caller(call)
    mid = call.params.str("message_id", required=True)
    mid = (await call.ctx.read(prefixes.complete_ids, "message", _id_texts([mid], "message_id"), field="message_id"))[0]
    result = await call.ctx.read(queries.get_message, mid, viewer=caller)
    await _with_mailbox_state(call, [result["message"]])
    return result


@method("message.sent")
async def sent(call: Call) -> dict:
    p = call.params
    caller = await call.ctx.caller(p)
    return await call.ctx.read(
        queries.sent_messages, caller, page=p.int("page", default=1), page_size=p.int("page_size", default=10)
    )


@method("message.thread")
async def thread(call: Call) -> dict:
    p = call.params
    caller = await _optional_caller(call)
    given = p.str("thread_id")
    if given and given.startswith("msg_"):  # "a thread id or any message id in it" (gc-mail, `thread show`)
        key, _ = await _require_message(call, "thread_id")
    elif given:
        key = await _thread_id(call)
    elif p.str("message_id"):
        key, _ = await _require_message(call)
    else:
        raise errors.ValidationError("invalid params: thread_id or message_id is required", field="thread_id")
    messages = await call.ctx.read(queries.thread_messages, key, viewer=caller)
    await _with_mailbox_state(call, messages)
    return {"thread_id": messages[0]["thread_id"] if messages else key, "messages": messages}


@method("thread.list")
async def thread_list(call: Call) -> dict:
    """The caller's threads (with a message of theirs or one in their inbox), newest activity first."""
    p = call.params
    caller = await call.ctx.caller(p)
    return await call.ctx.read(
        queries.thread_list,
        caller,
        page=p.int("page", default=1, minimum=1),
        page_size=p.int("page_size", default=10, minimum=1, maximum=queries.MAX_PAGE_SIZE),
    )


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
    key = key_param(p)
    if key is None:
        return await _edit(call, caller, mid, info, content, None)

    async def lookup():
        found = await call.ctx.read(idem.lookup, caller, key)
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


async def _edit(call: Call, caller: str, mid: str, info: dict, content: str, key: str | None) -> dict:
    p = call.params
    if info["agent_id"] != caller:
        raise errors.Forbidden(f"only the author (@{info['agent_id']}) can edit {mid}")
    if info["deleted"]:
        raise errors.Conflict(f"message {mid} is deleted and cannot be edited")
    current = (await call.ctx.read(queries.get_message, mid))["message"]
    fmt = p.str("format", default=current["body"]["format"], choices=ev.FORMATS)
    structured = _structured(call) if "structured" in p else current["body"].get("structured", "")
    _check_content(call, content, fmt, structured)
    session_id = await call.ctx.ensure_session(caller, p.str("session_id"))
    event = ev.MessageEdit(
        message_id=mid,
        agent_id=caller,
        session_id=session_id,
        body=ev.Body(content=content, format=fmt, structured=structured),
        idempotency_key=key or "",
    )
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
    event = ev.MessageDelete(
        message_id=mid, agent_id=caller, session_id=session_id, reason=p.str("reason", default="", max_len=1024)
    )
    await call.ctx.write([event])
    return {"message_id": mid, "deleted": True, "deleted_at": event.timestamp}


# ---------------------------------------------------------------------------- receipts


async def _write_receipts(call: Call, cls, caller: str, ids: list[str]) -> None:
    """One receipt event per 1,000 ids (one log line each; a line stays a sane size)."""
    session_id = await call.ctx.ensure_session(caller, call.params.str("session_id"))
    await call.ctx.write(
        [
            cls(agent_id=caller, session_id=session_id, message_ids=tuple(ids[i : i + 1000]))
            for i in range(0, len(ids), 1000)
        ]
    )


async def _read_flags(call: Call, caller: str, ids: list[str]) -> dict[str, bool]:
    """Whether each message counts as read before a mark: for the caller, or with
    ``mailbox_state`` for the mailbox it acts for (Gas City mail: one mailbox, an agent
    per machine, the latest mark of any of them wins — thrum.store.mailboxes)."""
    if call.params.bool("mailbox_state"):
        states = await call.ctx.read(queries.mailbox_states, ids)
        return {m: bool(states.get(m, {}).get("read")) for m in ids}
    return await call.ctx.read(queries.read_flags, caller, ids)


@method("message.markRead")
async def mark_read(call: Call) -> dict:
    """``marked_count`` counts the messages this call turned from unread to read."""
    p = call.params
    caller = await call.ctx.caller(p)
    if p.bool("all"):
        ids = await call.ctx.read(queries.unread_ids, caller, mentions_only=p.bool("mentions"), scope=p.tag("scope"))
        own: set[str] = set()
    else:
        ids, heads = await _require_messages(call, p.str_list("message_ids", required=True))
        own = {m for m, h in heads.items() if h["agent_id"] == caller}  # always read to their author
    if not ids:
        return {"marked_count": 0}
    flags = await _read_flags(call, caller, ids)
    todo = [m for m in ids if not flags.get(m) and m not in own]
    if todo:
        await _write_receipts(call, ev.MessageRead, caller, todo)
    result = {"marked_count": len(todo)}
    also = await call.ctx.read(queries.also_read_by, ids, caller)
    if also:
        result["also_read_by"] = also
    return result


@method("message.markUnread")
async def mark_unread(call: Call) -> dict:
    """``marked_count`` counts the messages this call turned from read to unread (one's
    own messages stay read: they are never unread to their author)."""
    p = call.params
    caller = await call.ctx.caller(p)
    ids, heads = await _require_messages(call, p.str_list("message_ids", required=True))
    flags = await _read_flags(call, caller, ids)
    todo = [m for m in ids if flags.get(m) and heads[m]["agent_id"] != caller]  # own: never unread
    if todo:
        await _write_receipts(call, ev.MessageUnread, caller, todo)
    return {"marked_count": len(todo)}


@method("message.archive")
async def archive(call: Call) -> dict:
    p = call.params
    caller = await call.ctx.caller(p)
    ids, _ = await _require_messages(call, p.str_list("message_ids", required=True))
    already = await call.ctx.read(queries.archived_ids, caller, ids)
    todo = [m for m in ids if m not in already]
    if not todo:
        raise errors.Conflict(f"already archived: {', '.join(ids[:10])}", data={"already_archived": ids})
    await _write_receipts(call, ev.MessageArchive, caller, todo)
    return {"archived_count": len(todo), "already_archived": sorted(already)}

"""team.* and agent.rotate_key: admissions, invites, revocations and key rotation
(docs/design/trust.md, "Admission", "Rotation and revocation")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import base64
from datetime import datetime, timezone

import trio

from ... import errors
from ... import events as ev
from ..dispatch import Call, method

if TYPE_CHECKING:
    from ...trust.teamroot import TeamRoot

_ROTATING = trio.Lock()


def _root(call: Call) -> TeamRoot:
    root = call.ctx.team.roster.root if call.ctx.team is not None else None
    if root is None:
        raise errors.ValidationError(
            "there is no team root: run `thrum team init`, commit thrum-team.toml on the normal branch, and sync"
        )
    return root


async def _admin(call: Call) -> str:
    """The caller, who must be an admin of the root with that admin's key here."""
    root = _root(call)
    who = await call.ctx.agents.caller(call.params)
    if who not in root.admins:
        raise errors.Forbidden(f"@{who} is not an admin of the team root (admins: {', '.join(sorted(root.admins))})")
    if call.ctx.keys.trusted_key(who) != root.admins[who].b64:
        raise errors.Forbidden(f"@{who}'s key on this machine is not the one the team root lists for it")
    return who


@method("team.status")
async def status(call: Call) -> dict[str, Any]:
    team = call.ctx.team
    return team.status() if team is not None else {"trust": "tofu"}


@method("team.admit")
async def admit(call: Call) -> dict[str, Any]:
    """An admin admits ``name`` with ``key`` (default: the key of its waiting registration)."""
    by = await _admin(call)
    name = ev.check_name(call.params.str("name", required=True), "name")
    key = call.params.str("key", max_len=64)
    if not key:
        waiting = call.ctx.keys.waiting_keys(name)
        if len(waiting) != 1:
            raise errors.ValidationError(
                f"no registration of {name} waits for admission here; pass its key (--key)"
                if not waiting
                else f"{len(waiting)} registrations of {name} wait, with different keys; choose one with --key "
                f"({', '.join(k[:12] + '…' for k in waiting)})",
                field="key",
            )
        key = waiting[0]
    from ...trust.keys import decode_public

    try:
        decode_public(key)
    except ValueError as exc:
        raise errors.ValidationError(f"invalid params: key: {exc}", field="key") from None
    event = ev.AgentAdmit(agent_id=name, by=by, public_key=key)
    await call.ctx.store.write([event])
    return {"agent_id": name, "public_key": key, "by": by, "event_id": event.event_id}


@method("team.invite")
async def invite(call: Call) -> dict[str, Any]:
    """An admin invites ``name``: an admission of a one-time invite key, whose private half
    is the code the new agent redeems (`thrum team join CODE`)."""
    from cryptography.hazmat.primitives import serialization

    from ...trust.keys import generate, public_b64

    by = await _admin(call)
    name = ev.check_name(call.params.str("name", required=True), "name")
    private = generate()
    seed = private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    event = ev.AgentAdmit(agent_id=name, by=by, invite=public_b64(private))
    await call.ctx.store.write([event])
    code = f"{name}.{base64.urlsafe_b64encode(seed).rstrip(b'=').decode()}"
    return {"agent_id": name, "by": by, "code": code, "event_id": event.event_id}


@method("team.revoke")
async def revoke(call: Call) -> dict[str, Any]:
    """Retire ``name``'s key from a point on: signed by an admin, or by the agent itself with
    that key. ``since`` (RFC 3339) or ``from_event`` (an event id); ``key`` defaults to the
    key this replica knows for the agent."""
    p = call.params
    name = ev.check_name(p.str("name", required=True), "name")
    who = await call.ctx.agents.caller(p)
    since, from_event = p.str("since", default="", max_len=64), p.str("from_event", default="", max_len=64)
    if bool(since) == bool(from_event):
        raise errors.ValidationError("invalid params: give exactly one of since and from_event", field="since")
    if since:
        since = _rfc3339(since)
    team = call.ctx.team
    root = team.roster.root if team is not None else None
    if who != name and (root is None or who not in root.admins):
        raise errors.Forbidden(f"@{who} may not revoke @{name}'s key: only an admin, or @{name} itself")
    if not call.ctx.keys.has_key(who):
        raise errors.IdentityError(f"agent {who!r} has no key on this machine")
    key = p.str("key", max_len=64)
    if who == name:
        own = call.ctx.keys.trusted_key(name)
        if key and key != own:
            raise errors.ValidationError("an agent revokes only the key it signs with here", field="key")
        key = own or ""
    if not key:
        keys = team.roster.keys(name) if team is not None else []
        if not keys:
            raise errors.NotFound(f"no key is known for {name!r}")
        key = keys[0].b64
    event = ev.AgentRevoke(agent_id=name, by=who, public_key=key, since=since, from_event=from_event)
    await call.ctx.store.write([event])
    return {"agent_id": name, "public_key": key, "by": who, "since": since, "from_event": from_event}


@method("agent.rotate_key")
async def rotate_key(call: Call) -> dict[str, Any]:
    """A new key for the caller, announced by an ``agent.rotate`` signed with the old one;
    lines signed with the old key after the rotation no longer count."""
    who = await call.ctx.agents.caller(call.params)
    if not call.ctx.keys.has_key(who):
        raise errors.IdentityError(f"agent {who!r} has no key on this machine to rotate")
    from ...trust.keys import generate, public_b64

    async with _ROTATING:  # one rotation at a time: each is signed by the key the last one left
        old = call.ctx.keys.trusted_key(who) or ""
        upcoming = generate()
        event = ev.AgentRotate(agent_id=who, public_key=public_b64(upcoming), old_key=old)
        await call.ctx.store.write([event])  # signed with the old key, which is still in place
        new = await call.ctx.keys.rotate_local_key(who, upcoming)
    return {"agent_id": who, "old_key": old, "public_key": new, "event_id": event.event_id}


def _rfc3339(text: str) -> str:
    """A time the user typed (RFC 3339, a date, or ``now``: the key found lost this moment)
    as the log writes times: UTC, ``…Z``."""
    try:
        now = text.strip().lower() == "now"
        when = datetime.now(timezone.utc) if now else datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise errors.ValidationError(
            f"invalid params: since: {text[:40]!r} is not a time (e.g. 2026-11-27T10:00:00Z, or now)", field="since"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")

"""agent.* methods: registration, listing, deletion, cleanup of orphans."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from ... import errors
from ... import events as ev
from ...store import addresses, directory
from ..addresses import REFRESH_WAIT
from ..dispatch import Call, method

_FIELDS = ("role", "module", "display", "kind", "worktree")
EVERYONE = directory.EVERYONE
_KIND_TEXT = {"group": "a group", "agent": "an agent", "role": "a role", EVERYONE: "the built-in group"}


def _worktree(call: Call) -> str:
    """The worktree's name (spec: ``"worktree": "main"``), never a local path: a
    registration is replicated to every clone of the repository."""
    value = call.params.str("worktree", default="", max_len=256)
    if "/" in value or "\\" in value or value.startswith("~"):
        raise errors.ValidationError(
            f"invalid params: worktree must be the git worktree's name (e.g. main), not a path (got {value[:60]!r})",
            field="worktree",
        )
    return value


async def _check_no_shadowing(call: Call, name: str, role: str, existing: dict[str, Any] | None) -> None:
    """An agent name or role must not be an address that already means something else:
    ``@reviewer`` must keep meaning the role, ``@everyone`` everyone (one error each)."""
    if name == EVERYONE:
        raise errors.ValidationError(
            f"invalid params: {EVERYONE!r} is the built-in group of all agents; choose another agent name", field="name"
        )
    if role == EVERYONE:
        raise errors.ValidationError(
            f"invalid params: {EVERYONE!r} is the built-in group of all agents; choose another role", field="role"
        )
    if existing is None:  # a new agent; re-registering keeps the name it has
        hit = await call.ctx.store.read(addresses.resolve_address, name)
        if hit is not None:
            raise errors.Conflict(
                f"@{name} is already {_KIND_TEXT.get(hit[0], hit[0])}; choose another agent name",
                data={"field": "name", "kind": hit[0]},
            )
    if existing is None or existing.get("role") != role:
        hit = await call.ctx.store.read(addresses.resolve_address, role)
        if hit is not None and hit[0] != "role":
            raise errors.Conflict(
                f"role @{role} is already {_KIND_TEXT.get(hit[0], hit[0])}; choose another role",
                data={"field": "role", "kind": hit[0]},
            )


async def _fetch_first(call: Call) -> None:
    """A new name, with a remote: fetch first, so a name another machine registered since
    our last sync is refused now rather than found as a conflict later (issue 30, item 4).
    Bounded like the fetch for an unknown address; without a remote, nothing to ask."""
    sync = call.ctx.sync
    if sync.mode() == "remote":
        await sync.refresh(REFRESH_WAIT)


@method("agent.register")
async def register(call: Call) -> dict[str, Any]:
    p = call.params
    name = p.str("name", required=True)
    ev.check_name(name, "name")
    role = p.str("role", required=True)
    if not ev.NAME_RE.fullmatch(role):
        raise errors.ValidationError(
            f"invalid params: role {role[:60]!r}: use lowercase letters, digits and _", field="role"
        )
    if role == name:
        raise errors.ValidationError(f"invalid params: agent name {name!r} must differ from its role", field="name")
    if role in ev.RESERVED_NAMES:
        raise errors.ValidationError(f"invalid params: role {role!r} is a reserved name; choose another", field="role")
    fields: dict[str, Any] = {
        "role": role,
        "module": p.str("module", default="", max_len=256),
        "display": p.str("display", default="", max_len=256),
        "kind": p.str("kind", default="agent", choices=ev.AGENT_KINDS),
        "worktree": _worktree(call),
    }
    existing = await call.ctx.agents.get(name, refresh=True)
    if existing is None and not call.ctx.keys.has_key(name):
        await _fetch_first(call)
        existing = await call.ctx.agents.get(name, refresh=True)
    await _check_no_shadowing(call, name, role, existing)
    elsewhere = call.ctx.keys.trusted_key(name)
    if not call.ctx.keys.has_key(name) and elsewhere is not None:
        raise errors.Conflict(
            f"agent {name!r} is already registered from another machine, with its own key; choose another "
            f"name, or copy .thrum/identities/{name}.json and {name}.key from that machine to act as it here"
        )
    code = p.str("invite", max_len=200)
    public_key, new_key = await _key_for(call, name, code)
    if existing is not None and not new_key and all(existing.get(k, "") == v for k, v in fields.items()):
        return {"agent": call.ctx.presence.overlay([dict(existing)])[0], "created": False, "updated": False}
    event_id = await call.ctx.agents.registration_id(name)  # after a removal, even one dated a little ahead
    register = ev.AgentRegister(agent_id=name, name=name, public_key=public_key, event_id=event_id, **fields)
    event: ev.Event | dict[str, Any] = register
    if code:  # redeeming an admin's invite (docs/design/trust.md, "Admission")
        event = {**register.to_dict(), "invite": _invite_proof(name, public_key, code)}
    await call.ctx.store.write([event])
    info = await call.ctx.agents.get(name, refresh=True)
    return {
        "agent": call.ctx.presence.overlay([dict(info)])[0] if info else info,
        "created": existing is None,
        "updated": existing is not None,
    }


async def _key_for(call: Call, name: str, code: str | None) -> tuple[str, bool]:
    """(public key, made now) that ``name`` registers with: its key here, made if it has none.
    Redeeming an invite (``code``) with a key this replica knows is retired (revoked, or
    rotated away elsewhere) gets a new key, the retired one kept beside it
    (``NAME.key.retired-…``): an admin's invite is how a revoked agent is re-admitted
    (docs/design/trust.md, "Writing with a retired key")."""
    keys = call.ctx.keys
    if code and keys.has_key(name) and not keys.may_sign(name):
        from ...trust.keys import generate, public_b64

        upcoming = generate()
        _invite_proof(name, public_b64(upcoming), code)  # a code that is none replaces no key
        return await keys.rotate_local_key(name, upcoming), True
    return await keys.ensure_key(name)


def _invite_proof(name: str, public_key: str, code: str) -> dict[str, Any]:
    """The ``invite`` field proving that the holder of invite ``code`` admits ``name`` with this key."""
    import base64
    import binascii

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ...trust.signing import invite_proof

    invited, _, seed_text = code.partition(".")
    if invited != name:
        raise errors.ValidationError(f"invalid params: this invite is for {invited!r}, not {name!r}", field="invite")
    try:
        seed = base64.urlsafe_b64decode(seed_text + "=" * (-len(seed_text) % 4))
        private = Ed25519PrivateKey.from_private_bytes(seed)
    except (binascii.Error, ValueError):
        raise errors.ValidationError("invalid params: invite is not an invite code", field="invite") from None
    return invite_proof(name, public_key, private)


@method("agent.list")
async def list_agents(call: Call) -> dict[str, Any]:
    p = call.params
    await call.ctx.presence.flush()  # the heartbeats calls made due are in what it says
    result = await call.ctx.store.read(
        directory.list_agents, role=p.str("role"), module=p.str("module"), include_deleted=p.bool("include_deleted")
    )
    call.ctx.presence.overlay(result["agents"])
    return result


@method("agent.get")
async def get(call: Call) -> dict[str, Any]:
    name = call.params.str("name", required=True)
    await call.ctx.presence.flush()
    info = await call.ctx.agents.get(name, refresh=True)
    if info is None:
        raise errors.NotFound(f"agent {name!r} not found")
    return {"agent": call.ctx.presence.overlay([dict(info)])[0]}


async def _actor(call: Call, target: str | None = None) -> str:
    """Who removes agents (and signs the removal): ``caller``, else the agent itself when
    its key is here, else this machine's only identity."""
    if call.params.str("caller"):
        actor = await call.ctx.agents.caller(call.params)
        if not call.ctx.keys.has_key(actor):
            raise errors.IdentityError(f"agent {actor!r} has no key on this machine; act as one of its identities")
        return actor
    if target and call.ctx.keys.has_key(target):
        return target
    local = call.ctx.keys.local_agents()
    if len(local) == 1:
        return local[0]
    raise errors.ValidationError(
        "invalid params: caller is required: name the agent who removes others "
        f"(this machine has {len(local)} identities{': ' + ', '.join(local[:10]) if local else ''})",
        field="caller",
    )


async def _delete(call: Call, names: list[str], reason: str, how: str, actor: str) -> None:
    events: list[ev.Event] = []
    for name in names:
        if call.ctx.keys.may_sign(name):  # its sessions end in its name: not another machine's, nor a retired key's
            for s in await call.ctx.store.read(directory.list_sessions, name, active_only=True):
                events.append(ev.SessionEnd(session_id=s["session_id"], agent_id=name, reason="normal"))
        events.append(ev.AgentCleanup(agent_id=name, reason=reason, method=how, by="" if actor == name else actor))
    await call.ctx.store.write(events)
    for name in names:
        call.ctx.agents.forget(name)


@method("agent.delete")
async def delete(call: Call) -> dict[str, Any]:
    """Remove ``name``. Removing another agent (one whose key is not the actor's) needs
    ``force``, and the removal names who did it (``by``): the agent's own next action on
    a machine holding its key brings it back (`thrum.daemon.callers`)."""
    p = call.params
    name = p.str("name", required=True)
    if await call.ctx.agents.get(name, refresh=True) is None:
        raise errors.NotFound(f"agent {name!r} not found")
    actor = await _actor(call, name)
    if actor != name and not p.bool("force"):
        raise errors.ValidationError(
            f"invalid params: @{actor} is deleting another agent (@{name}): pass force: true "
            f"(`thrum agent delete {name} --force`); @{name} comes back when it next acts",
            field="force",
        )
    await _delete(call, [name], p.str("reason", default="manual deletion", max_len=1024), "manual", actor)
    return {"agent_id": name, "deleted": True, "deleted_by": actor}


MAX_AGE_DAYS = 36_500  # a century: any older cutoff is before every agent (and before datetime's range)


@method("agent.cleanup")
async def cleanup(call: Call) -> dict[str, Any]:
    p = call.params
    days = p.number("older_than_days", default=7.0, minimum=0, maximum=MAX_AGE_DAYS)
    cutoff = (datetime.now(timezone.utc) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.999Z")
    await call.ctx.presence.flush()  # an agent that only reads is not stale
    candidates = await call.ctx.store.read(directory.stale_agents, cutoff)
    removed: list[str] = []
    if p.bool("force") and candidates:
        await _delete(call, candidates, f"no activity for {days:g} days", "automated", await _actor(call))
        removed = candidates
    return {"candidates": candidates, "removed": removed, "older_than_days": days}

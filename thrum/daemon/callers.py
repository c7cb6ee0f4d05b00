"""Who acts: the caller named in params, the repository's single identity by default,
and an agent this machine holds the key of, brought back after a removal.

Rule (issue 30, item 3; docs/design/trust.md, "Removal and time"): no event from the
log can make a replica refuse to act for an agent whose private key it holds. A
removed agent's own next action (a send, a heartbeat, an MCP start, any RPC naming it
as caller) registers it again with the fields it had, under an event id that sorts
after the removal, so every replica sees it back. Under a team root (issue 25) who
may remove whom is decided there; this rule stays.
"""

from __future__ import annotations

import logging

import trio

from .. import errors
from .. import events as ev
from ..store import directory

log = logging.getLogger(__name__)

__all__ = ["bring_back", "default_caller", "registration_id"]


async def default_caller(identities_dir, key: str) -> str:
    """The repository's only identity, as in the CLI (`thrum.identity` rule 4).

    Raises:
        ValidationError: none or several identities (the message names the param).
    """
    from .. import identity

    idents = await trio.to_thread.run_sync(identity.list_identities, identities_dir)
    if len(idents) == 1:
        return idents[0].name
    known = (
        f"this repository has {len(idents)} agent identities ({', '.join(i.name for i in idents[:10])})"
        if idents
        else "this repository has no agent identity"
    )
    raise errors.ValidationError(f"invalid params: {key} is required (the acting agent's name): {known}", field=key)


async def registration_id(writer, name: str) -> str:
    """An event id for a new registration of ``name`` that sorts after every registration
    and removal of it this replica has applied (one dated a little ahead included)."""
    floor = await writer.read(directory.registration_floor, name)
    return ev.ulid_after(floor) if floor else ev.new_ulid()


async def bring_back(writer, keys, name: str) -> bool:
    """Register ``name`` again when it was removed and its key is here; False when it
    was never registered (or its key is not here): the caller must register it."""
    pair = await trio.to_thread.run_sync(lambda: keys.get(name, fresh=True))
    if pair is None:
        return False
    was = await writer.read(directory.get_agent, name, include_deleted=True)
    if was is None or not was.get("deleted"):
        return False
    fields = {k: was.get(k) or "" for k in ("role", "module", "display", "worktree")}
    event = ev.AgentRegister(
        agent_id=name,
        name=name,
        kind=was.get("kind") or "agent",
        public_key=pair[1].b64,
        event_id=await registration_id(writer, name),
        **fields,
    )
    await writer.write([event])
    log.info("@%s acted after its removal by @%s: registered again", name, was.get("deleted_by") or name)
    return True

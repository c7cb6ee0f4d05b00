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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .. import errors
from .. import events as ev
from ..store import directory
from ..trust.keys import LocalKeys
from .params import Params

if TYPE_CHECKING:
    from .presence import Presence
    from .sessions import Sessions
    from .writer import Writer

log = logging.getLogger(__name__)

__all__ = ["Agents", "bring_back", "default_caller", "registration_id"]


class Agents:
    """Who acts: the caller a request names, and the live agents' directory entries (cached).

    The cache holds live agents only; registrations and removals (here or by a sync)
    drop their entries (`on_applied`)."""

    def __init__(self, writer: Writer, keys: LocalKeys, identities: Path, presence: Presence, sessions: Sessions):
        self._writer = writer
        self._keys = keys
        self._identities = identities
        self._presence = presence
        self._sessions = sessions
        self._cache: dict[str, dict[str, Any]] = {}

    async def get(self, name: str, *, refresh: bool = False) -> dict[str, Any] | None:
        """A live agent's directory entry (cached), or None."""
        if not refresh and name in self._cache:
            return self._cache[name]
        info: dict[str, Any] | None = await self._writer.read(directory.get_agent, name)
        if info is not None and not info.get("deleted"):
            self._cache[name] = info
            return info
        self._cache.pop(name, None)
        return None

    async def caller(self, p: Params, key: str = "caller") -> str:
        """The acting agent named in params; must be registered. Marks it as seen, unless the
        call only watches (`Params.observing`: the Web UI, or ``observe: true``).

        Without ``caller`` the repository's single agent identity acts, as in the CLI
        (`thrum.identity` rule 4); with none or several, the error names the param.
        An agent removed while its key is here is registered again (`bring_back`).
        """
        name = p.str(key)
        if name is None:
            name = await default_caller(self._identities, key)
        if not ev.NAME_RE.fullmatch(name):
            raise errors.ValidationError(f"invalid params: {key} {name[:60]!r} is not an agent name", field=key)
        if await self.get(name) is None and not (  # reads the database on a cache miss
            await bring_back(self._writer, self._keys, name) and await self.get(name, refresh=True)
        ):
            raise errors.IdentityError(
                f"unknown agent {name!r}: register it first with "
                f"`thrum quickstart --name {name} --role ROLE --module MODULE`"
            )
        if not p.observing:
            self._presence.touch(name)
        return name

    async def registration_id(self, name: str) -> str:
        """An event id for a registration of ``name`` that wins over its last removal."""
        return await registration_id(self._writer, name)

    def forget(self, name: str) -> None:
        """A removed agent: not cached, no session current here, not seen."""
        self._cache.pop(name, None)
        self._sessions.forget(name)
        self._presence.forget(name)

    async def on_applied(self, applied: list[dict[str, Any]], source: str) -> None:
        """Writer subscriber: a registration or removal changes what the cache holds."""
        for d in applied:
            if d["type"] in ("agent.register", "agent.cleanup"):
                self._cache.pop(d["agent_id"], None)


async def default_caller(identities_dir: Path, key: str) -> str:
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


async def registration_id(writer: Writer, name: str) -> str:
    """An event id for a new registration of ``name`` that sorts after every registration
    and removal of it this replica has applied (one dated a little ahead included)."""
    floor: str | None = await writer.read(directory.registration_floor, name)
    return ev.ulid_after(floor) if floor else ev.new_ulid()


async def bring_back(writer: Writer, keys: LocalKeys, name: str) -> bool:
    """Register ``name`` again when it was removed and its key is here; False when it
    was never registered (or its key is not here): the caller must register it."""
    pair = await trio.to_thread.run_sync(lambda: keys.get(name, fresh=True))
    if pair is None:
        return False
    was = await writer.read(directory.get_agent, name, include_deleted=True)
    if was is None or not was.get("deleted"):
        return False
    fields: dict[str, Any] = {k: was.get(k) or "" for k in ("role", "module", "display", "worktree")}
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

"""Who is around, as the MCP tools report it: an agent's status, a recipient's.

Rules:

1. An agent's status is the daemon's (``agent.list``'s ``status``: `thrum.presence`,
   the one definition of active / idle / offline the CLI and the Web UI show too);
   nothing here derives another.
2. The ``recipient_status`` of a send: for an agent, its status; for a role, a
   group or ``@everyone``, the liveliest of the agents it stands for (the sender
   left out): ``active`` when any is, else ``idle`` when any is, else ``offline``;
   ``known`` when it stands for nobody; ``unknown`` when it cannot be told. The
   agent list it needs is fetched alongside the send on the same connection
   (`send_with_audience`), so the status costs no extra round trip.
"""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import anyio

from .. import presence as definition
from ..errors import ThrumError
from .link import DaemonLink

_RANK = {name: rank for rank, name in enumerate(definition.STATUSES)}  # active first


def agent_status(agent: dict[str, Any], now: datetime | None = None) -> str:
    """The daemon's ``status`` of an ``agent.list`` item (rule 1)."""
    given = agent.get("status")
    if isinstance(given, str) and given in _RANK:
        return given
    return definition.status(agent.get("last_seen_at"), now)  # a daemon that does not say: the same rule


def liveliest(statuses: Iterable[str]) -> str:
    """active, else idle, else offline, of some agents' statuses."""
    return min(statuses, key=lambda s: _RANK.get(s, len(_RANK)), default="offline")


def audience_status(agents: list[dict[str, Any]], now: datetime | None = None) -> str:
    """The recipient_status of an address standing for ``agents``."""
    if not agents:
        return "known"
    return liveliest(agent_status(a, now) for a in agents)


async def send_with_audience(
    link: DaemonLink, params: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """message.send, and agent.list fetched alongside it (for recipient_status) on the same
    connection: the status costs no extra round trip. The list is None if it failed."""
    box: dict[str, Any] = {}

    async def fetch_agents() -> None:
        try:
            box["agents"] = (await link.call("agent.list")).get("agents") or []
        except ThrumError:
            box["agents"] = None

    error: ThrumError | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(fetch_agents)
        try:
            sent = await link.agent_call("message.send", params)
        except ThrumError as exc:  # raised below, not wrapped in the task group's ExceptionGroup
            error = exc
    if error is not None:
        raise error
    return sent, box.get("agents")


async def recipient_status(link: DaemonLink, kind: str, address: str, agents: list[dict[str, Any]] | None) -> str:
    """active / idle / offline / known for what ``address`` resolved to; unknown when it cannot be told."""
    if agents is None:
        return "unknown"
    try:
        now = None
        live = [a for a in agents if not a.get("deleted")]
        if kind == "agent":
            match = [a for a in live if a.get("name") == address]
            return agent_status(match[0], now) if match else "unknown"
        if kind == "group":
            names = set((await link.call("group.members", {"name": address, "expand": True})).get("agents") or [])
            audience = [a for a in live if a.get("name") in names]
        elif kind == "role":
            audience = [a for a in live if a.get("role") == address]
        elif kind == "everyone":
            audience = live
        else:
            return "unknown"
        return audience_status([a for a in audience if a.get("name") != link.me], now)
    except (ThrumError, KeyError, TypeError):
        return "unknown"


def as_seen_by_agents(agents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """agent.list items as an agent should see them (issue 30, item 9): the agents that act
    for a Gas City mailbox on each machine (``gcr_…``/``gck_…``, role ``gc``) are the
    provider's plumbing; each mailbox shows once, by its Gas City address, last seen when
    any of its agents was."""
    from ..gcmail import addresses

    out: list[dict[str, Any]] = []
    boxes: dict[str, dict[str, Any]] = {}
    for a in agents:
        name = a.get("name") or ""
        if a.get("role") != addresses.ROLE or not addresses.is_gc_agent(name):
            out.append(a)
            continue
        box = a.get("module") or addresses.mailbox_of(name) or name
        seen = boxes.get(box)
        if seen is None:
            seen = boxes[box] = {
                **a,
                "name": addresses.address_of(name, a.get("display")),
                "agent_id": box,
                "module": box,
                "display": "",
            }
            out.append(seen)
        else:
            if (a.get("last_seen_at") or "") > (seen.get("last_seen_at") or ""):
                seen["last_seen_at"] = a.get("last_seen_at")
            seen["status"] = liveliest([agent_status(seen), agent_status(a)])
    return out


def proxies(agents: list[dict[str, Any]]) -> set[str]:
    """Names of the agents that act for Gas City mailboxes (never a broadcast's recipients)."""
    from ..gcmail import addresses

    return {a["name"] for a in agents if a.get("role") == addresses.ROLE and addresses.is_gc_agent(a.get("name", ""))}

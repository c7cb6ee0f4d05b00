"""Who is around, as the MCP tools report it: an agent's status, a recipient's.

Rules (the spec's status derivation, spec/mcp-server.md):

1. An agent is ``active`` when it was seen (any call as the agent, or its MCP
   server's heartbeat) in the last two minutes (`ACTIVE_WINDOW_S`), ``offline``
   otherwise.
2. The ``recipient_status`` of a send: for an agent, its status; for a role, a
   group or ``@everyone``, ``active`` when any agent it stands for (the sender
   left out) is, ``offline`` when none is, ``known`` when it stands for nobody;
   ``unknown`` when it cannot be told. The agent list it needs is fetched
   alongside the send on the same connection (`send_with_audience`), so the
   status costs no extra round trip.
"""

from datetime import datetime, timezone
from typing import Any

import anyio

from ..errors import ThrumError
from .link import DaemonLink

ACTIVE_WINDOW_S = 120.0


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def agent_status(agent: dict[str, Any], now: datetime | None = None) -> str:
    """``active`` when seen in the last two minutes, else ``offline``."""
    seen = _parse_time(agent.get("last_seen_at") or "")
    if seen is None:
        return "offline"
    now = now or datetime.now(timezone.utc)
    return "active" if (now - seen).total_seconds() < ACTIVE_WINDOW_S else "offline"


def audience_status(agents: list[dict[str, Any]], now: datetime | None = None) -> str:
    """The recipient_status of an address standing for ``agents``."""
    if not agents:
        return "known"
    return "active" if any(agent_status(a, now) == "active" for a in agents) else "offline"


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
    """active / offline / known for what ``address`` resolved to; unknown when it cannot be told."""
    if agents is None:
        return "unknown"
    try:
        now = datetime.now(timezone.utc)
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
        elif (a.get("last_seen_at") or "") > (seen.get("last_seen_at") or ""):
            seen["last_seen_at"] = a.get("last_seen_at")
    return out


def proxies(agents: list[dict[str, Any]]) -> set[str]:
    """Names of the agents that act for Gas City mailboxes (never a broadcast's recipients)."""
    from ..gcmail import addresses

    return {a["name"] for a in agents if a.get("role") == addresses.ROLE and addresses.is_gc_agent(a.get("name", ""))}

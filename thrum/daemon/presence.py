"""When to write an ``agent.heartbeat``, so presence travels with the log (issue 30, item 5).

An agent's last seen is its newest event in the log (`thrum.presence`, folded by
`thrum.store.directory_fold.last_seen`); this module only makes sure an agent that is
around but writes nothing still has a recent event. Rules (docs/design/presence.md):

1. Every RPC that acts as an agent *sees* it (`touch`), except a call that only
   watches: one on an observer connection (the Web UI's page) or with ``observe:
   true`` (`Params.observing`). Someone displaying an agent's inbox or counts is not
   that agent being around. Seeing is a dict lookup; nothing else happens on the
   request's path.
2. An agent seen while its newest event is ``presence_interval`` old or older (less
   `slack`, so that the MCP server's heartbeat every 60 s finds it due) gets one
   ``agent.heartbeat``, written by the background task `run`, signed and chained
   like every event. So: at most one per agent per interval, none while the agent
   writes anything else (a message, a read mark is presence too), none while it is
   not seen, none for an agent whose key is not on this machine (another machine
   speaks for it), none for the agents that stand in for a Gas City mailbox (role
   ``gc``: the provider's plumbing, not agents anyone waits for).
3. The newest event of each agent seen here is kept in memory from what the writer
   publishes (local writes and synced events alike); the database is asked only
   when that says a heartbeat may be due, a second after the call that saw the
   agent (what that call writes, a message say, is presence and makes a heartbeat
   needless). ``agent.list`` and ``agent.get`` write the heartbeats due at once
   (`flush`), so they show what the calls before them made due.
4. ``presence_interval`` 0 writes none.
5. `overlay` puts the one ``status`` (`thrum.presence.status`) on ``agent.list`` and
   ``agent.get`` items: the CLI, MCP and the UI show it and derive nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import trio

from .. import events as ev
from .. import presence as definition
from ..store import directory

if TYPE_CHECKING:
    from .writer import Writer

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 60.0
SETTLE_S = 1.0  # how long after a call saw an agent its heartbeat is considered (`Presence.run`)
GC_ROLE = "gc"  # agents that act for a Gas City mailbox on one machine (thrum.gcmail.addresses)
GC_PREFIXES = ("gcr_", "gck_")


def slack(interval: float) -> float:
    """How much earlier than ``interval`` a heartbeat counts as due: a client that calls
    every ``interval`` seconds (the MCP server's heartbeat) must find it due each time,
    although its previous heartbeat was stamped a moment after that call arrived."""
    return min(5.0, interval / 10)


def _epoch(text: str) -> float | None:
    try:
        return ev.parse_time(text).timestamp() if text else None
    except (ValueError, OverflowError):
        return None


class Presence:
    def __init__(
        self,
        writer: Writer,
        *,
        interval: float = DEFAULT_INTERVAL,
        can_sign: Callable[[str], bool] = lambda agent: True,
        clock: Callable[[], float] = time.time,
    ):
        self._writer = writer
        self.interval = float(interval)
        self._can_sign = can_sign
        self._clock = clock
        self._newest: dict[str, float] = {}  # agent seen here -> its newest event that counts (epoch s)
        self._due: set[str] = set()  # seen while a heartbeat may be due (rule 2), not yet looked at
        self._wake = trio.Event()
        self._flushing = trio.Lock()
        self.written = 0  # heartbeats written since the start (sync status, tests)
        writer.subscribe(self._published)

    # ------------------------------------------------------------------ on the request's path
    def touch(self, agent: str) -> None:
        """``agent`` acted just now (rule 1)."""
        if self.interval <= 0:
            return
        newest = self._newest.get(agent)
        if newest is not None and self._clock() - newest < self.interval - slack(self.interval):
            return
        self._due.add(agent)
        self._wake.set()

    def overlay(self, agents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """agent.list items with their ``status`` (rule 5; in place, returned)."""
        now = datetime.fromtimestamp(self._clock(), timezone.utc)
        for item in agents:
            item["status"] = definition.status(item.get("last_seen_at"), now)
        return agents

    def forget(self, agent: str) -> None:
        """A deleted agent: what was known of it goes (it starts afresh if it comes back)."""
        self._newest.pop(agent, None)
        self._due.discard(agent)

    # ------------------------------------------------------------------ what the log says
    def _published(self, applied: list[dict[str, Any]], source: str) -> None:
        """Writer subscriber (rule 3): the newest event of each agent seen here."""
        newest = self._newest
        for d in applied:
            author = ev.event_author(d)
            if author not in newest or not definition.counts_as_presence(d.get("type", "")):
                continue
            at = _epoch(d.get("timestamp") or "")
            if at is not None and at > newest[author]:
                newest[author] = at

    # ------------------------------------------------------------------ the background task
    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Looks at the agents seen a moment after the first of them was: the call that saw
        an agent is often one that writes (a send), and what it writes is presence."""
        task_status.started()
        while True:
            await self._wake.wait()
            await trio.sleep(min(SETTLE_S, self.interval / 4))
            self._wake = trio.Event()
            await self.flush()

    async def flush(self) -> None:
        """Look at every agent seen since the last look now, writing the heartbeats due;
        returns once they are written (one flush at a time: a second waits for the first,
        so ``agent.list`` after an agent's call shows the heartbeat that call made due)."""
        async with self._flushing:
            while self._due:
                batch, self._due = sorted(self._due), set()
                for agent in batch:
                    try:
                        await self._beat(agent)
                    except Exception:  # presence is best effort: never fail or stop the daemon for it
                        log.exception("could not write a heartbeat for %s", agent)
                        self._newest[agent] = self._clock()  # not again before an interval

    async def _beat(self, agent: str) -> None:
        now = self._clock()
        if not self._can_sign(agent):
            self._newest[agent] = now  # another machine speaks for it; asked again in an interval
            return
        info = await self._writer.read(directory.get_agent, agent)
        if info is None or (info.get("role") == GC_ROLE and agent.startswith(GC_PREFIXES)):
            self._newest[agent] = now  # a Gas City mailbox's agent writes none; asked again in an interval
            return
        newest = max(_epoch(info.get("last_seen_at") or "") or 0.0, self._newest.get(agent, 0.0))
        self._newest[agent] = newest
        if now - newest < self.interval - slack(self.interval):
            return
        await self._writer.write([ev.AgentHeartbeat(agent_id=agent)])
        self._newest[agent] = max(self._newest.get(agent, 0.0), now)
        self.written += 1

"""When each agent was last seen: every action of an agent counts, at no cost to it.

Rules:

1. Every RPC that acts as an agent (it names a ``caller``: send, list, read,
   wait, ...) marks the agent as seen now, except a call that only watches: one
   on an observer connection (the Web UI's page) or with ``observe: true``
   (`Params.observing`). Someone displaying an agent's inbox or counts is not
   that agent being active. Marking is a dict write in memory; nothing else
   happens on the request's path.
2. Marks reach SQLite (``agents.last_seen_at``) in batches: at most one
   transaction per `FLUSH_INTERVAL` seconds however busy the agents are, and
   once more when the daemon stops. Liveness is never written to the event log
   (DESIGN §3): it is local to this machine, and lost with a rebuilt database.
3. Readers see the freshest value: `overlay` lays the in-memory marks over the
   rows read from SQLite, so ``agent.list`` is exact between flushes.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import trio

from ..store import directory

if TYPE_CHECKING:
    from .writer import Writer

log = logging.getLogger(__name__)

FLUSH_INTERVAL = 5.0


def rfc3339(epoch: float) -> str:
    """Seconds since the epoch as RFC 3339 UTC with milliseconds (the log's own format)."""
    dt = datetime.fromtimestamp(epoch, timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


class Presence:
    def __init__(self, writer: Writer, *, interval: float = FLUSH_INTERVAL):
        self._writer = writer
        self._interval = interval
        self._seen: dict[str, float] = {}  # agent -> last action (epoch seconds)
        self._dirty: dict[str, float] = {}  # marks not yet in SQLite
        self._wake = trio.Event()

    def touch(self, agent: str) -> None:
        """``agent`` acted just now."""
        now = time.time()
        self._seen[agent] = now
        self._dirty[agent] = now
        self._wake.set()

    def overlay(self, agents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """agent.list items with ``last_seen_at`` brought up to date (in place; returned)."""
        for item in agents:
            mark = self._seen.get(item.get("agent_id") or item.get("name") or "")
            if mark is not None:
                fresh = rfc3339(mark)
                if fresh > (item.get("last_seen_at") or ""):
                    item["last_seen_at"] = fresh
        return agents

    def forget(self, agent: str) -> None:
        """A deleted agent is no longer seen (a new agent of the same name starts afresh)."""
        self._seen.pop(agent, None)
        self._dirty.pop(agent, None)

    async def flush(self) -> None:
        """Write the marks made since the last flush (one transaction)."""
        if not self._dirty:
            return
        batch, self._dirty = self._dirty, {}
        try:
            # Under the writer's lock like every other write: a commit from another connection
            # in the middle of a fold's transaction fails the fold at once ("database is locked").
            await self._writer.write_local(directory.touch_agents, {a: rfc3339(t) for a, t in batch.items()})
        except Exception:  # liveness is best effort: never fail or stop the daemon for it
            log.exception("could not record when agents were last seen")

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Flush in batches while the daemon runs (a timer started by the first mark)."""
        task_status.started()
        while True:
            await self._wake.wait()
            await trio.sleep(self._interval)  # let marks gather: one write per interval
            self._wake = trio.Event()
            await self.flush()

"""Recording *delivered*: the messages that reach this machine's agents, as receipts they sign.

A message is delivered to an agent when it is in the replica that holds the
agent's key (docs/design/delivery.md). The recorder hears every folded batch
(local writes and syncs alike, `Writer.subscribers`), notes the new messages, and
shortly after writes one ``message.delivered`` per local agent listing every
message that reached it meanwhile: a burst of N messages costs one line per
recipient, not N. `flush` records what is noted at once (a hook asking what to
surface must see everything that is here). On start it sweeps the last
`RECENT_DAYS` for messages folded while no recorder ran (a catch-up from the log).

Only messages created in the last `RECENT_DAYS` are recorded: a fresh clone that
receives a long history does not sign a delivery for each old message.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable

import trio

from .. import events as ev
from ..store import delivery as delivery_store

log = logging.getLogger(__name__)

BATCH_DELAY = 0.5  # seconds a noted message waits for others to share its delivered line
MAX_IDS_PER_EVENT = 1000  # one line stays a sane size (as for read receipts)


def since_key(now: datetime | None = None) -> str:
    """The time key `RECENT_DAYS` before ``now``."""
    now = now or datetime.now(timezone.utc)
    then = now - timedelta(days=delivery_store.RECENT_DAYS)
    return then.strftime("%Y-%m-%dT%H:%M:%S.") + f"{then.microsecond // 1000:03d}Z"


class DeliveryRecorder:
    """Notes new messages and writes ``message.delivered`` for the local agents they reach.

    ``read(fn, ...)`` runs a store query in a worker thread, ``write(events)`` makes
    events durable, ``local_agents()`` names the agents whose key is here.
    """

    def __init__(
        self,
        read: Callable[..., Awaitable[Any]],
        write: Callable[[list[ev.Event]], Awaitable[Any]],
        local_agents: Callable[[], list[str]],
        *,
        delay: float = BATCH_DELAY,
    ):
        self._read = read
        self._write = write
        self._local_agents = local_agents
        self._delay = delay
        self._noted: set[str] = set()
        self._sweep = True  # the first flush looks at every recent message
        self._kick = trio.Event()
        self._kick.set()  # the start-up sweep
        self._lock = trio.Lock()
        self.recorded = 0  # message ids recorded as delivered (for status and tests)

    def on_applied(self, applied: list[dict], source: str) -> None:
        """A writer subscriber: note the messages of a folded batch."""
        new = [d["message_id"] for d in applied if d["type"] == "message.create"]
        if new:
            self._noted.update(new)
            self._kick.set()

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._kick.wait()
            self._kick = trio.Event()  # a message noted from here on kicks the next round
            if not self._sweep:
                await trio.sleep(self._delay)
            try:
                await self.flush()
            except Exception:  # the log stays the truth; the next round tries again
                log.exception("recording delivered messages failed")
                self._kick.set()
                await trio.sleep(self._delay)

    async def flush(self) -> int:
        """Record every noted message that reached a local agent; returns how many ids were recorded."""
        async with self._lock:
            sweep, noted = self._sweep, self._noted
            self._sweep, self._noted = False, set()
            if not sweep and not noted:
                return 0
            agents = self._local_agents()
            if not agents:
                return 0
            try:
                found = await self._read(
                    delivery_store.undelivered, agents, None if sweep else sorted(noted), since_key()
                )
            except BaseException:
                self._noted |= noted
                self._sweep = self._sweep or sweep
                raise
            events = [
                ev.MessageDelivered(agent_id=agent, message_ids=tuple(ids[i : i + MAX_IDS_PER_EVENT]))
                for agent, ids in sorted(found.items())
                for i in range(0, len(ids), MAX_IDS_PER_EVENT)
            ]
            if events:
                await self._write(events)
                self.recorded += sum(len(e.message_ids) for e in events)
                log.debug("recorded %d delivered message ids in %d events", self.recorded, len(events))
            return sum(len(ids) for ids in found.values())

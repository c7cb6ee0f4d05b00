"""Recording *delivered*: the messages that reach this machine's agents, as receipts they sign.

A message is delivered to an agent when it is in the replica that holds the
agent's key (docs/design/delivery.md). The recorder hears every folded batch
(local writes and syncs alike, `Writer.subscribers`) and notes the new messages
with the time they arrived; it writes the receipts later, one ``message.delivered``
per local agent listing every message that reached it (a burst of N messages costs
one line per recipient, not N), each line stamped with the latest arrival among its
messages. It writes them when something asks (`flush`: a hook asking what to show,
a wake-up check), every `FLUSH_EVERY_S`, and when `MAX_NOTED` messages wait.

Why not at once: a receipt written in reaction to a sync would be a new local event
right after every sync, so two replicas would never be equal after a round of syncs
and every sync would be followed by another. Written when the recipient's side looks,
it travels with the surfacing that usually follows, in the same sync.

The first flush also sweeps the last `RECENT_DAYS` for messages folded while no
recorder ran (a catch-up from the log at start-up). Only messages created in the
last `RECENT_DAYS` are recorded: a fresh clone that receives a long history does
not sign a delivery for each old message.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable

import trio

from .. import events as ev
from ..store import delivery as delivery_store

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 300.0  # noted messages are recorded at least this often, looked for or not
MAX_NOTED = 10_000  # more noted messages than this are recorded at once (memory stays bounded)
MAX_IDS_PER_EVENT = 1000  # one line stays a sane size (as for read receipts)

Then = Callable[[dict[str, list[str]]], Awaitable[list[ev.Event]]]


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
        every: float = FLUSH_EVERY_S,
    ):
        self._read = read
        self._write = write
        self._local_agents = local_agents
        self._every = every
        self._noted: dict[str, str] = {}  # message id -> when it arrived here
        self._sweep = True  # the first flush also looks at every recent message
        self._kick = trio.Event()
        self._lock = trio.Lock()
        self.recorded = 0  # message ids recorded as delivered (for status and tests)

    def on_applied(self, applied: list[dict[str, Any]], source: str) -> None:
        """A writer subscriber: note the messages of a folded batch, and when they arrived."""
        now = None
        for d in applied:
            if d["type"] == "message.create" and d["message_id"] not in self._noted:
                now = now or ev.now_rfc3339()
                self._noted[d["message_id"]] = now
        if len(self._noted) > MAX_NOTED:
            self._kick.set()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            with trio.move_on_after(self._every):
                await self._kick.wait()
            self._kick = trio.Event()
            if not self._noted:
                continue
            try:
                await self.flush()
            except Exception:  # the log stays the truth; the next round tries again
                log.exception("recording delivered messages failed")

    async def flush(self, then: Then | None = None) -> int:
        """Record every noted message that reached a local agent; returns how many ids were recorded.

        ``then(found)`` (``found``: the ids being recorded, per agent) returns more
        events to make durable in the same write: a hook's surfacing travels with the
        delivered receipts it depends on, one write instead of two.
        """
        async with self._lock:
            sweep, noted = self._sweep, self._noted
            self._sweep, self._noted = False, {}
            agents = self._local_agents() if sweep or noted else []
            try:
                found = (
                    await self._read(delivery_store.undelivered, agents, None if sweep else sorted(noted), since_key())
                    if agents
                    else {}
                )
                events = self._receipts(found, noted)
                more = await then(found) if then is not None else []
                if events or more:
                    await self._write(events + more)
            except BaseException:
                self._noted.update(noted)
                self._sweep = self._sweep or sweep
                raise
            if events:
                self.recorded += sum(len(e.message_ids) for e in events)
                log.debug("recorded %d delivered message ids in %d events", self.recorded, len(events))
            return sum(len(ids) for ids in found.values())

    @staticmethod
    def _receipts(found: dict[str, list[str]], noted: dict[str, str]) -> list[ev.MessageDelivered]:
        """One ``message.delivered`` per agent and 1,000 ids, stamped with the latest arrival among them."""
        now = ev.now_rfc3339()
        events: list[ev.MessageDelivered] = []
        for agent, ids in sorted(found.items()):
            for i in range(0, len(ids), MAX_IDS_PER_EVENT):
                part = tuple(ids[i : i + MAX_IDS_PER_EVENT])
                arrived = max((noted.get(m) or now for m in part), key=ev.time_key)
                events.append(ev.MessageDelivered(agent_id=agent, message_ids=part, timestamp=arrived))
        return events

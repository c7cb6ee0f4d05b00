"""Push wake-ups for ``wait_for_message``: the subscription, the queue, the wait.

Rules:

1. On every connection the waiter subscribes to the daemon's real-time channel
   (``subscribe.create``, filter ``mention`` of this agent: its name, role,
   groups and ``@everyone``, resolved by the daemon like the inbox). After the
   first connection it resumes with ``since_event_id`` (the last message event it
   saw), so the daemon replays what was written meanwhile; then it lists the
   unread inbox once (messages created since this server started that it has
   not seen) for what a replay cannot give (events that reached a restarted
   daemon by sync with an older event id). A ``subscription.ended`` (its session
   ended: the agent started another, e.g. from the CLI) makes it subscribe again the
   same way; when no event was seen yet there is no point to resume from, so it lists
   the unread inbox then too (a message written between the end and the new
   subscription would otherwise wait for the next check_messages). A ``notification.dropped`` (its outbox overflowed)
   does too, resuming from the last event seen *before* the notice (events read
   after it, while the new subscription is being made, come after the gap and
   must not move the resume point past it), and then catches up from the unread
   inbox as after a reconnect (for a gap before any event was seen, or a second
   gap during the replay). The old subscription is deleted first (kept, it goes on
   filling the same queue and crowds the replay out), and until the new one's
   ``subscription.replayed`` its own resume point stays the resume point (a replay
   comes in log order: none of its events is one), as docs/realtime.md advises.
2. Every new message for this agent, never its own, is queued once (message ids
   already seen are ignored, so a replay or a second subscription never
   duplicates). The queue keeps at most `QUEUE_MAX` messages and drops the
   oldest: a dropped message stays unread and `check_messages` still returns it.
3. A wait takes the oldest queued message its ``priority_filter`` allows (others
   stay queued), re-reads it (``message.get``: skipped when it was read meanwhile,
   e.g. by ``check_messages``, or deleted) and marks it read. Otherwise it sleeps
   on an event that every queued message sets, until the timeout. No polling.
4. One wait at a time. A cancelled wait leaves its message unread and queued
   (put back first; a mark-read in flight is undone). A daemon restart during a
   wait is survived: the wait keeps sleeping while the link reconnects and the
   replay refills the queue.
5. A cancel can cross the answer: the client gives up on a wait just as the
   server answers it, so the cancel arrives after the answer was written and the
   client drops the answer. The waiter remembers the last `ANSWERED_MAX` waits
   that returned a message (request id → the message, for `ANSWERED_S`); a
   cancel for one of them (`cancelled`) marks its message unread again and puts
   it back first in the queue, so the next wait or check_messages returns it.
   The same holds for a cancel that finds the wait still returning its message
   (claimed, but the SDK will not write the answer): it waits for the wait to end.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any, Iterable

import anyio
import anyio.lowlevel

from ..errors import NotFound, ThrumError, Unavailable
from .link import DaemonLink

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from ..client_async import AsyncClient

log = logging.getLogger(__name__)

QUEUE_MAX = 1000
SEEN_MAX = 50_000
ANSWERED_MAX = 32  # answered waits remembered for a late cancel (rule 5)
ANSWERED_S = 60.0  # ... and for this long: a cancel crosses an answer within moments
ALLOWED = {
    "all": None,
    "critical": frozenset({"critical"}),
    "high_and_above": frozenset({"critical", "high"}),
    "normal_and_above": frozenset({"critical", "high", "normal"}),
}
MESSAGE_EVENTS = frozenset({"message.create", "message.edit", "message.delete"})


class WaitBusy(ThrumError):
    pass


def sender_of(message: dict[str, Any]) -> str:
    """The author of a message.list item (``agent_id``) or a message.get result (``author``)."""
    return message.get("agent_id") or (message.get("author") or {}).get("agent_id") or ""


class Waiter:
    def __init__(self, link: DaemonLink, started_at: str):
        self.link = link
        self.me = link.me
        self.started_at = started_at
        self.queue: deque[dict[str, Any]] = deque(maxlen=QUEUE_MAX)
        self._seen: dict[str, None] = {}  # insertion-ordered set, bounded
        self._changed = anyio.Event()
        self._resubscribe = anyio.Event()
        self.active = False
        self._unwinding = False  # the active wait was cancelled and is cleaning up
        self._idle = anyio.Event()
        self._idle.set()
        self.last_event_id: str | None = None
        self._gap = False  # a notification.dropped not yet answered by a new subscription
        self._gap_from: str | None = None  # the last event seen before that notice: the resume point
        self._replay_from: str | None = None  # the resume point of a subscription still replaying
        self.subscription_id: int | None = None
        self.subscribed = 0  # subscriptions made so far
        self._answered: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()  # request id -> (when, item)
        self._request_id: str | None = None  # the MCP request the running wait answers
        link.add_notification_handler(self.on_notification)
        link.add_connection_task(self.connection_task)

    # ------------------------------------------------------------------ notifications (reader task)

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method in MESSAGE_EVENTS:
            if params.get("event_id"):
                self.last_event_id = params["event_id"]
            if method == "message.create":
                self.offer(params)
            elif method == "message.delete":
                self._drop_queued({params.get("message_id")})
        elif method == "notification.dropped":
            log.warning(
                "the daemon dropped %s notifications; resubscribing from the last one seen before",
                params.get("dropped"),
            )
            if not self._gap:  # the first notice since the last resubscription: the gap starts here
                self._gap, self._gap_from = True, self._resume_point
            self._resubscribe.set()
        elif method == "subscription.replayed" and params.get("subscription_id") == self.subscription_id:
            self._replay_from = None
        elif method == "subscription.ended" and params.get("subscription_id") == self.subscription_id:
            log.info("subscription ended (%s); subscribing again", params.get("reason"))
            self._resubscribe.set()

    def offer(self, item: dict[str, Any]) -> bool:
        """Queue a new message for this agent (a notification or a message.list item) once."""
        mid = item.get("message_id")
        if not mid or item.get("agent_id") == self.me or mid in self._seen:
            return False
        self._remember(mid)
        self.queue.append({"message_id": mid, "priority": item.get("priority") or "normal"})
        self._changed.set()
        self._changed = anyio.Event()
        return True

    def consumed(self, message_ids: Iterable[str]) -> None:
        """Messages handed out by check_messages: never queue them again."""
        ids = set(message_ids)
        for mid in ids:
            self._remember(mid)
        self._drop_queued(ids)

    def _remember(self, mid: str) -> None:
        self._seen[mid] = None
        if len(self._seen) > SEEN_MAX:
            del self._seen[next(iter(self._seen))]

    def _drop_queued(self, ids: set[Any]) -> None:
        if any(item["message_id"] in ids for item in self.queue):
            kept = [item for item in self.queue if item["message_id"] not in ids]
            self.queue.clear()
            self.queue.extend(kept)

    # ------------------------------------------------------------------ per connection

    async def connection_task(
        self, client: AsyncClient, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        resumed = self.subscribed > 0
        gap = await self._subscribe(client)
        if resumed or gap:
            await self._catch_up(client)
        task_status.started()
        while True:
            await self._resubscribe.wait()
            self._resubscribe = anyio.Event()
            old, self.subscription_id = self.subscription_id, None
            if old is not None:  # first: kept, it would crowd the replay out of the same queue
                try:
                    await client.call("subscribe.delete", {"subscription_id": old})
                except NotFound:  # it ended on its own
                    pass
            since = self._resume_point
            gap = await self._subscribe(client)
            if gap or not since:
                await self._catch_up(client)

    @property
    def _resume_point(self) -> str | None:
        """The last event seen; during a replay (log order: a replayed event is no resume
        point), the point the replaying subscription resumed from."""
        return self._replay_from if self._replay_from is not None else self.last_event_id

    async def _subscribe(self, client: AsyncClient) -> bool:
        """Subscribe (again), resuming from the last event seen, or from before the gap; True after a gap."""
        gap, self._gap = self._gap, False
        since = self._gap_from if gap else self._resume_point
        params = {"filter_type": "mention", "mention": self.me, "caller": self.me}
        if since:
            params["since_event_id"] = since
        try:
            result = await client.call("subscribe.create", params)
        except BaseException:
            if gap and not self._gap:  # not made: the gap still needs answering (on the next connection)
                self._gap = True
            raise
        self.subscription_id = result.get("subscription_id")
        self._replay_from = since or None  # until its subscription.replayed
        self.subscribed += 1
        return gap

    async def _catch_up(self, client: AsyncClient) -> None:
        result = await client.call(
            "message.list",
            {
                "caller": self.me,
                "mentions": True,
                "unread": True,
                "exclude_own": True,
                "sort_order": "desc",
                "page_size": 100,
            },
        )
        fresh = [
            m
            for m in result.get("messages") or []
            if (m.get("created_at") or "") >= self.started_at and m.get("message_id") not in self._seen
        ]
        for m in reversed(fresh):
            self.offer(m)

    # ------------------------------------------------------------------ waiting

    async def wait(
        self, seconds: float, priority_filter: str = "all", *, request_id: str | None = None
    ) -> tuple[dict[str, Any] | None, float]:
        """The next message for this agent (marked read), or None at the timeout; and the seconds waited.

        ``request_id`` is the MCP request the wait answers: a message it returns is
        remembered under it, for a cancel that arrives after the answer (rule 5).

        Raises:
            WaitBusy: another wait is running.
            ThrumError: the daemon failed a call (other than being unreachable, which is waited out).
        """
        if self.active:
            # A wait the client has just cancelled may not have unwound yet: let it run first.
            await anyio.lowlevel.checkpoint()
            if self.active and self._unwinding:
                await self._idle.wait()
        if self.active:
            raise WaitBusy(
                "another wait_for_message is already running on this server (one at a time); "
                "wait for it to return or cancel it"
            )
        allowed = ALLOWED[priority_filter]
        self.active = True
        self._unwinding = False
        self._request_id = request_id
        self._idle = anyio.Event()
        start = anyio.current_time()
        deadline = start + seconds
        try:
            while True:
                changed = self._changed
                item = self._take(allowed)
                if item is not None:
                    try:
                        message = await self._claim(item)
                    except Unavailable:
                        self.queue.appendleft(item)
                        await self._wait_for_link(deadline)
                        continue
                    if message is not None:
                        if request_id is not None:
                            self._answered_with(request_id, item)
                        return message, anyio.current_time() - start
                    continue
                if anyio.current_time() >= deadline:
                    return None, anyio.current_time() - start
                # the line a test waits for before it sends (a wake-up, not the queue, is under test)
                log.debug("wait %s: nothing queued for it; waiting", request_id)
                with anyio.move_on_at(deadline):
                    await changed.wait()
        finally:
            self.active = False
            self._idle.set()

    def _answered_with(self, request_id: str, item: dict[str, Any]) -> None:
        self._answered[request_id] = (anyio.current_time(), item)
        while len(self._answered) > ANSWERED_MAX:
            self._answered.popitem(last=False)

    async def cancelled(self, request_id: str) -> None:
        """The client cancelled request ``request_id`` (rule 5).

        A wait still running is cancelled by the SDK and puts its message back itself
        (rule 4). A wait that already returned a message, whose answer the client now
        drops, gives the message back: unread again (as this agent) and first in the
        queue. Any other id is ignored.
        """
        # The SDK cancels a wait still running, but it may already have claimed its message
        # and be about to return it (the answer is then never written): let it finish first.
        while self.active and self._request_id == request_id:
            await self._idle.wait()
        answered = self._answered.pop(request_id, None)
        if answered is None or anyio.current_time() - answered[0] > ANSWERED_S:
            return
        item = answered[1]
        mid = item["message_id"]
        try:
            await self.link.agent_call("message.markUnread", {"message_ids": [mid]})
        except ThrumError as exc:
            log.warning(
                "wait %s was cancelled after it returned %s; could not mark it unread: %s", request_id, mid, exc.message
            )
            return
        log.info("wait %s was cancelled after it returned %s: unread again and queued first", request_id, mid)
        if all(queued["message_id"] != mid for queued in self.queue):
            self.queue.appendleft(item)
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_idle(self) -> None:
        """Return once no wait is running (a cancelled one has finished its clean-up)."""
        while self.active:
            await self._idle.wait()

    def _take(self, allowed: frozenset[str] | None) -> dict[str, Any] | None:
        for i, item in enumerate(self.queue):
            if allowed is None or item["priority"] in allowed:
                del self.queue[i]
                return item
        return None

    async def _wait_for_link(self, deadline: float) -> None:
        with anyio.move_on_at(deadline):
            await self.link.wait_connected()

    async def _claim(self, item: dict[str, Any]) -> dict[str, Any] | None:
        """Re-read a queued message and mark it read; None when it is read, deleted or gone."""
        mid = item["message_id"]
        marking = False
        try:
            try:
                got = await self.link.agent_call("message.get", {"message_id": mid})
            except NotFound:
                return None
            message = got.get("message") or {}
            if message.get("deleted") or message.get("is_read") or sender_of(message) == self.me:
                return None
            marking = True
            await self.link.agent_call("message.markRead", {"message_ids": [mid]})
            return message
        except anyio.get_cancelled_exc_class():
            self._unwinding = True
            with anyio.CancelScope(shield=True):
                self.queue.appendleft(item)
                if marking:
                    with anyio.move_on_after(5):
                        try:
                            await self.link.agent_call("message.markUnread", {"message_ids": [mid]})
                        except ThrumError as exc:
                            log.warning("could not leave %s unread after a cancelled wait: %s", mid, exc.message)
            raise

"""Subscriptions: who hears of which event, and wake-ups for `message.wait`.

Rules:

1. A subscription belongs to one connection and, when created with a
   ``caller``, to that agent's session; it ends when either ends (the client is
   told with ``subscription.ended``), or on ``subscribe.delete``.
2. Filters (spec/events.md): ``scope`` (exact scope match), ``mention`` (the
   message has a mention ref naming one of the subscription's targets, resolved
   like the inbox: an agent → itself, its role, groups holding it or its role,
   ``everyone``; a role or group → itself, groups holding the role,
   ``everyone``), ``all``. Message events (create/edit/delete, thread.updated)
   are filtered; agent, session, receipt (read/unread/archive) and group
   events reach ``all`` subscriptions only. A mention subscription made by an
   agent (``caller``) never delivers that agent's own messages: they are never
   unread to it.
   Targets are re-resolved whenever an agent, group or membership changes.
3. Every event reaches the hub the same way, local writes and events folded by
   a sync alike (`Writer.publish`). Publishing never blocks on a client: each
   connection has its own bounded outbox (`Connection.notify`), and an event
   goes out at most once per connection however many of its subscriptions
   match.
4. Resume: ``since_event_id`` replays every matching event published after that
   event from a ring of recent events in arrival order, then continues live
   with no gap and no duplicate (live events are held back during the replay
   and anything the replay already sent is skipped). When the ring does not
   reach back that far the log is read instead, in event_id order, in pieces of
   `BACKLOG_CHUNK` events, one read at a time (`thrum.store.backlog.BacklogReader`):
   memory stays bounded however long the history and however often a slow
   client resumes, and resumes never crowd out queries. While a piece that
   is not the last is sent, live events beyond the reader's scan are not held:
   a later piece reads them from the log (they were appended before they were
   published).
   Events in the ring with an id older than the resume point arrived after it
   (a sync brings events made earlier elsewhere): they are replayed first. The
   ring is bounded by count and by bytes. Replay is paced by the client's
   outbox; ``thread.updated`` is a live summary and is not replayed.
5. ``message.wait`` sleeps on `inbox_changed`, which is replaced whenever
   something that can add to an inbox is published. No polling.
6. When a message joins a thread, each connection whose subscriptions match hears
   ``thread.updated``: the thread's summary as its subscriber sees it, read in a
   task of its own after the publish (never on the writer's path), and not sent to a
   subscription still replaying.

The filters and the subscription record are `thrum.daemon.subscription` (pure).
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from .. import errors
from .. import events as ev
from ..store import queries
from ..store.backlog import BacklogReader, SegmentIndex
from ..store.log import EventLog
from .connection import Connection
from .replay_ring import RING_BYTES, RING_SIZE, ReplayRing
from .subscription import (
    INBOX_CHANGERS,
    MESSAGE_TYPES,
    NOTIFY_TYPES,
    TARGET_CHANGERS,
    Event,
    Info,
    Subscription,
    info_of,
    matches,
    payload,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Read = Callable[..., Awaitable[Any]]  # `Writer.read`: ``fn(db, ...)`` in a worker thread

BACKLOG_CHUNK = 2_000  # events read from the log per piece of a resume from beyond the ring


class Hub:
    def __init__(
        self,
        read: Read,
        event_log: EventLog,
        nursery: trio.Nursery,
        *,
        ring_size: int = RING_SIZE,
        ring_bytes: int = RING_BYTES,
    ):
        """``read``: the writer's queries (targets, message routing, thread summaries);
        ``event_log``: read for a resume from beyond the ring; ``nursery``: replays and
        thread summaries run there, never on the writer's path."""
        self._read = read
        self._log = event_log
        self._nursery = nursery
        self.subs: dict[int, Subscription] = {}
        self._ids = itertools.count(1)
        self.ring = ReplayRing(ring_size, ring_bytes)
        self.segments = SegmentIndex()  # shared by every resume that reads the log
        self._log_reads = trio.Lock()  # one piece read at a time: resumes never crowd out queries
        self.backlog_chunk = BACKLOG_CHUNK
        self._targets_gen = 0  # bumped by every agent/group change
        self.changed = trio.Event()  # anything published
        self.inbox_changed = trio.Event()  # something that can add to an inbox
        self.closed = False

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self.closed = True
        self._wake(inbox=True)

    def connection_closed(self, conn: Connection) -> None:
        for sid in [s.id for s in self.subs.values() if s.conn is conn]:
            del self.subs[sid]

    def session_ended(self, session_id: str, agent: str) -> None:
        """End the subscriptions made under ``agent``'s session ``session_id`` (another
        agent's end naming the same id ends nothing of ``agent``'s)."""
        for sub in [s for s in self.subs.values() if s.session_id == session_id and s.agent == agent]:
            del self.subs[sub.id]
            sub.conn.notify(
                "subscription.ended", {"subscription_id": sub.id, "reason": "session ended", "session_id": session_id}
            )

    # ------------------------------------------------------------------ subscriptions
    async def subscribe(
        self,
        conn: Connection,
        *,
        filter_type: str,
        scope: dict[str, str] | None = None,
        mention: str | None = None,
        session_id: str | None = None,
        agent: str | None = None,
        since_event_id: str | None = None,
    ) -> Subscription:
        """Register a subscription; with ``since_event_id``, replay what came after that event first.

        Raises:
            ValidationError: ``since_event_id`` is not an event id.
        """
        if since_event_id and not ev.ULID_RE.fullmatch(since_event_id):
            raise errors.ValidationError(
                "invalid params: since_event_id must be an event id (ULID)", field="since_event_id"
            )
        targets = None
        while mention:
            generation = self._targets_gen
            targets = frozenset(await self._resolve(mention))
            if generation == self._targets_gen:  # no agent/group change meanwhile: still true
                break
        sub = Subscription(
            id=next(self._ids),
            conn=conn,
            filter_type=filter_type,
            scope=scope,
            mention=mention,
            session_id=session_id,
            agent=agent,
            created_at=ev.now_rfc3339(),
            targets=targets,
        )
        if since_event_id:
            sub.held = deque()
        self.subs[sub.id] = sub
        if since_event_id:
            self._nursery.start_soon(self._replay, sub, since_event_id)
        return sub

    def unsubscribe(self, conn: Connection, sub_id: int) -> bool:
        sub = self.subs.get(sub_id)
        if sub is None or sub.conn is not conn:
            return False
        del self.subs[sub_id]
        return True

    def serves(self, conn: Connection) -> bool:
        """Whether ``conn`` has a subscription (a connection waiting for events is not idle)."""
        return any(s.conn is conn for s in self.subs.values())

    def served(self) -> set[int]:
        """Ids of every connection with a subscription."""
        return {id(s.conn) for s in self.subs.values()}

    def list_for(self, conn: Connection) -> list[dict[str, Any]]:
        return [s.describe() for s in self.subs.values() if s.conn is conn]

    async def _resolve(self, name: str) -> list[str]:
        targets: list[str] = await self._read(queries.targets_of, name)
        return targets

    async def _refresh_targets(self) -> None:
        """Re-resolve every mention subscription (an agent, group or membership changed)."""
        self._targets_gen += 1
        memo: dict[str, frozenset[str]] = {}
        for sub in list(self.subs.values()):
            if not sub.mention:
                continue
            if sub.mention not in memo:
                memo[sub.mention] = frozenset(await self._resolve(sub.mention))
            sub.targets = memo[sub.mention]

    # ------------------------------------------------------------------ publishing
    async def publish(self, applied: list[dict[str, Any]], source: str) -> None:
        """Called by the store after each durable batch (local writes and sync alike)."""
        if not applied or self.closed:
            return
        kinds = {d["type"] for d in applied}
        if kinds & TARGET_CHANGERS:
            await self._refresh_targets()
        notifiable = [d for d in applied if d["type"] in NOTIFY_TYPES]
        infos = await self._message_infos([d for d in notifiable if d["type"] in MESSAGE_TYPES])
        for d in notifiable:
            info = infos.get(d["message_id"]) if d["type"] in MESSAGE_TYPES else None
            self.ring.remember(d, info)
            self._deliver(d, info)
        for d in notifiable:
            if d["type"] == "agent.session.end":
                self.session_ended(d["session_id"], d.get("agent_id") or "")
        creates = [d for d in notifiable if d["type"] == "message.create" and d.get("thread_id")]
        if creates and self.subs:
            # thread summaries need queries: never hold up the writer for them
            self._nursery.start_soon(self._send_thread_updates, creates, infos)
        self._wake(inbox=bool(kinds & INBOX_CHANGERS))

    def _wake(self, *, inbox: bool) -> None:
        self.changed.set()
        self.changed = trio.Event()
        if inbox:
            self.inbox_changed.set()
            self.inbox_changed = trio.Event()

    async def _message_infos(self, events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Scopes and mention refs of the messages these events are about."""
        infos: dict[str, dict[str, Any]] = {}
        need = []
        for d in events:
            if d["type"] == "message.create":
                infos[d["message_id"]] = info_of(d)
            elif d["message_id"] not in infos:
                need.append(d["message_id"])
        if need and any(s.filter_type != "all" for s in self.subs.values()):
            infos.update(await self._read(queries.message_routing, need))
        return infos

    def _deliver(self, d: dict[str, Any], info: dict[str, Any] | None) -> None:
        """Once per connection through a live subscription; a connection with none that
        matches gets it held by each of its replaying ones (a client may delete any of
        them: one deleted mid-replay takes nothing with it)."""
        matching = [sub for sub in list(self.subs.values()) if matches(sub, d, info)]
        sent: set[int] = set()
        for sub in matching:
            if sub.held is None and id(sub.conn) not in sent:
                sent.add(id(sub.conn))
                sub.conn.notify(d["type"], payload(d, sub))
        for sub in matching:
            if sub.held is None or id(sub.conn) in sent:
                continue
            if sub.rescan_above is not None and d["event_id"] > sub.rescan_above:
                continue  # a later piece of this replay reads it from the log
            if len(sub.held) >= self.ring.size:  # a replay slower than the traffic: never hold unbounded
                sub.held.popleft()
                sub.conn.count_dropped(1)  # announced like any drop; the client resumes from what it read
            sub.held.append((d, info))

    # ------------------------------------------------------------------ resume
    async def _replay(self, sub: Subscription, since: str) -> None:
        """Send what the client missed after ``since``, then release held live events."""
        try:
            recent = self.ring.after(since)
            if recent is not None:
                await self._send_replay(sub, recent)
            else:
                await self._replay_log(sub, since)
            while sub.held and sub.id in self.subs:  # a deleted subscription's replay just stops
                d, info = sub.held.popleft()
                if d["event_id"] in sub.replayed:
                    continue
                await _room(sub.conn)
                if sub.id in self.subs:
                    sub.conn.notify(d["type"], payload(d, sub))
            if sub.id in self.subs:
                sub.conn.notify(
                    "subscription.replayed",
                    {"subscription_id": sub.id, "since_event_id": since, "replayed": sub.replayed_count},
                )
        except Exception:
            log.exception("replay for subscription %d failed", sub.id)
            if sub.id in self.subs:
                del self.subs[sub.id]
                sub.conn.notify(
                    "subscription.ended", {"subscription_id": sub.id, "reason": "replay failed; see daemon.log"}
                )
        finally:
            sub.held = None
            sub.rescan_above = None
            sub.replayed = set()

    async def _replay_log(self, sub: Subscription, since: str) -> None:
        """Replay from the log in pieces; the last piece is followed by the held live events.

        An event can be read from the log before it is published, so a held one is checked
        against the ids of this piece and the one before (the first piece: the late ones)."""
        # Every event still in the ring arrived after ``since`` (which is older than the ring):
        # those with an older id (a sync brings events made earlier elsewhere) are not in
        # the log's order after ``since``, so they go first.
        late = [(d, info) for d, info in self.ring if d["event_id"] <= since]
        await self._send_replay(sub, late)
        reader = BacklogReader(self._log, self.segments, since, NOTIFY_TYPES, piece=self.backlog_chunk)
        previous: set[str] = set(sub.replayed)
        while sub.id in self.subs:
            sub.rescan_above = None  # hold everything while the piece is read
            async with self._log_reads:
                if sub.id not in self.subs:
                    return
                piece, skip_above = await trio.to_thread.run_sync(_log_backlog, reader)
            sub.replayed = set(previous)
            if skip_above is None:
                await self._send_replay(sub, piece)
                return
            # live events after ``skip_above`` are in the log already: a later piece brings them
            sub.rescan_above = skip_above
            sub.held = deque(x for x in sub.held or () if x[0]["event_id"] <= skip_above)
            await self._send_replay(sub, piece)
            while sub.held and sub.id in self.subs:  # appended after the scan, older than its end
                d, info = sub.held.popleft()
                if d["event_id"] not in sub.replayed:
                    await _room(sub.conn)
                    if sub.id in self.subs:
                        sub.conn.notify(d["type"], payload(d, sub))
            previous = sub.replayed - previous

    async def _send_replay(
        self, sub: Subscription, backlog: list[tuple[dict[str, Any], dict[str, Any] | None]]
    ) -> None:
        missing = [d["message_id"] for d, info in backlog if info is None and d["type"] in MESSAGE_TYPES]
        if missing and sub.filter_type != "all":
            found = await self._read(queries.message_routing, list(dict.fromkeys(missing)))
            backlog = [(d, info if info is not None else found.get(d.get("message_id", ""))) for d, info in backlog]
        for d, info in backlog:
            if matches(sub, d, info):
                await _room(sub.conn)
                if sub.id not in self.subs:
                    return
                sub.replayed.add(d["event_id"])
                sub.replayed_count += 1
                sub.conn.notify(d["type"], payload(d, sub, replay=True))

    async def _send_thread_updates(self, creates: list[Event], infos: dict[str, Info]) -> None:
        """``thread.updated``: tell each connection whose subscriptions match the summary of
        the thread a new message joined, as its subscriber sees it (unread counts are per
        agent). Not replayed on resume, and not sent to a subscription still replaying (it
        would arrive before the events it summarises)."""
        try:
            for d in creates:
                info = infos.get(d["message_id"])
                probe = {"type": "thread.updated"}
                # a notification of its own, so its own id: clients de-duplicate by event_id
                # (spec/events.md) and must not drop it as a repeat of the message.create
                update_id = ev.new_ulid()
                done: set[int] = set()
                summaries: dict[str | None, dict[str, Any] | None] = {}
                for sub in list(self.subs.values()):
                    if id(sub.conn) in done or sub.held is not None or not matches(sub, probe, info):
                        continue
                    done.add(id(sub.conn))
                    if sub.agent not in summaries:
                        summaries[sub.agent] = await self._read(queries.thread_summary, d["thread_id"], sub.agent)
                    summary = summaries[sub.agent]
                    if summary is None or sub.id not in self.subs:
                        continue
                    update = {
                        "type": "thread.updated",
                        "timestamp": d["timestamp"],
                        "event_id": update_id,
                        "v": 1,
                        "cause_event_id": d["event_id"],
                        **summary,
                    }
                    sub.conn.notify("thread.updated", payload(update, sub))
        except Exception:
            log.exception("thread.updated notifications failed")

    # ------------------------------------------------------------------ waiting
    async def wait_changed(self, deadline: float) -> bool:
        """Block until something is published or the deadline passes (trio.current_time)."""
        event = self.changed
        with trio.move_on_at(deadline):
            await event.wait()
            return not self.closed
        return False


async def _room(conn: Connection) -> None:
    """Wait until the connection's outbox has room."""
    await conn.wait_for_room()


# ---------------------------------------------------------------------------- queries (worker threads)


def _log_backlog(reader: BacklogReader) -> tuple[list[tuple[dict[str, Any], dict[str, Any] | None]], str | None]:
    """The next piece of notifiable events from the log, in event_id order (slow path).

    Edits and deletes of messages created before the piece have no routing here; the
    replay looks them up for the subscriptions that filter on it."""
    picked, skip_above = reader.next_piece()
    infos = {d["message_id"]: info_of(d) for d in picked if d["type"] == "message.create"}
    return [(d, infos.get(d["message_id"]) if d["type"] in MESSAGE_TYPES else None) for d in picked], skip_above

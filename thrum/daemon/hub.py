"""Subscriptions: who hears of which event, and wake-ups for `message.wait`.

Rules:

1. A subscription belongs to one connection (and, when given, one session); it
   ends when either ends, or on ``subscribe.delete``.
2. Filters (spec/events.md): ``scope`` (exact scope match), ``mention`` (the
   message mentions the name through a mention ref, resolved like the inbox:
   the agent itself, its role, a group holding it or its role, ``everyone``),
   ``all``. Message events (create/edit/delete, thread.updated) are filtered;
   agent and session events reach ``all`` subscriptions only.
3. Publishing never blocks: each connection has its own bounded outbox
   (`Connection.notify`). One notification per connection per event, however
   many of its subscriptions match.
4. Resume: ``since_event_id`` replays every matching event after that id from a
   ring of recent events (or the log when the ring does not reach back), then
   continues live without a gap or a duplicate.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from dataclasses import dataclass, field

import trio

from .. import errors
from .. import events as ev
from ..store import queries

log = logging.getLogger(__name__)

RING_SIZE = 20_000
NOTIFY_TYPES = frozenset({
    "message.create", "message.edit", "message.delete", "agent.register", "agent.cleanup",
    "agent.update", "agent.session.start", "agent.session.end",
})
MESSAGE_TYPES = frozenset({"message.create", "message.edit", "message.delete"})
TARGET_CHANGERS = frozenset({"agent.register", "agent.cleanup", "group.create", "group.delete",
                             "group.member.add", "group.member.remove"})


@dataclass
class Subscription:
    id: int
    conn: object
    filter_type: str
    scope: dict | None = None
    mention: str | None = None
    session_id: str | None = None
    agent: str | None = None
    created_at: str = ""
    targets: frozenset | None = None          # resolved mention targets (cache)
    buffering: list | None = None             # live events held back during a replay
    replayed: set = field(default_factory=set)

    def describe(self) -> dict:
        d = {"subscription_id": self.id, "filter_type": self.filter_type, "created_at": self.created_at,
             "session_id": self.session_id or ""}
        if self.scope:
            d["scope"] = self.scope
        if self.mention:
            d["mention"] = self.mention
        return d


class Hub:
    def __init__(self, daemon):
        self.daemon = daemon
        self.subs: dict[int, Subscription] = {}
        self._ids = itertools.count(1)
        self.ring: deque = deque(maxlen=RING_SIZE)  # (event_id, event dict, message info)
        self.changed = trio.Event()
        self.closed = False

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self.closed = True
        self.changed.set()

    def connection_closed(self, conn) -> None:
        for sid in [s.id for s in self.subs.values() if s.conn is conn]:
            del self.subs[sid]

    def session_ended(self, session_id: str) -> None:
        for sid in [s.id for s in self.subs.values() if s.session_id == session_id]:
            del self.subs[sid]

    # ------------------------------------------------------------------ subscriptions
    async def subscribe(self, conn, *, filter_type: str, scope=None, mention=None, session_id=None,
                        agent=None, since_event_id=None) -> Subscription:
        sub = Subscription(id=next(self._ids), conn=conn, filter_type=filter_type, scope=scope,
                           mention=mention, session_id=session_id, agent=agent, created_at=ev.now_rfc3339())
        if mention:
            sub.targets = frozenset(await self._targets(mention))
        if since_event_id:
            sub.buffering = []
            self.subs[sub.id] = sub
            try:
                await self._replay(sub, since_event_id)
            except BaseException:
                self.subs.pop(sub.id, None)
                raise
        else:
            self.subs[sub.id] = sub
        return sub

    def unsubscribe(self, conn, sub_id: int) -> bool:
        sub = self.subs.get(sub_id)
        if sub is None or sub.conn is not conn:
            return False
        del self.subs[sub_id]
        return True

    def list_for(self, conn) -> list[dict]:
        return [s.describe() for s in self.subs.values() if s.conn is conn]

    async def _targets(self, name: str) -> list[str]:
        agent = await self.daemon.store.read(queries.get_agent, name)
        if agent is not None and not agent.get("deleted"):
            return await self.daemon.store.read(queries.mention_targets, name)
        return await self.daemon.store.read(_role_targets, name)

    # ------------------------------------------------------------------ publishing
    async def publish(self, applied: list[dict], source: str) -> None:
        """Called by the store after each durable batch (local writes and sync)."""
        if not applied:
            return
        if any(d["type"] in TARGET_CHANGERS for d in applied):
            await self._refresh_targets()
        infos = await self._message_infos([d for d in applied if d["type"] in MESSAGE_TYPES])
        for d in applied:
            if d["type"] not in NOTIFY_TYPES:
                continue
            info = infos.get(d.get("message_id", ""))
            self.ring.append((d["event_id"], d, info))
            await self._deliver(d, info)
        creates = [d for d in applied if d["type"] == "message.create" and d.get("thread_id")]
        if creates and self.subs and self.daemon.nursery is not None:
            # thread summaries need queries: never hold up the writer for them
            self.daemon.nursery.start_soon(self._thread_updates, creates, infos)
        self.changed.set()
        self.changed = trio.Event()

    async def _refresh_targets(self) -> None:
        for sub in list(self.subs.values()):
            if sub.mention:
                sub.targets = frozenset(await self._targets(sub.mention))

    async def _message_infos(self, events: list[dict]) -> dict[str, dict]:
        """Scopes and mention refs of the messages these events are about."""
        infos: dict[str, dict] = {}
        need = []
        for d in events:
            if d["type"] == "message.create":
                infos[d["message_id"]] = {"scopes": d["scopes"], "refs": d["refs"],
                                          "thread_id": d.get("thread_id", ""), "agent_id": d["agent_id"]}
            elif d["message_id"] not in infos:
                need.append(d["message_id"])
        if need and self.subs:
            infos.update(await self.daemon.store.read(_message_tags, need))
        return infos

    def _matches(self, sub: Subscription, d: dict, info: dict | None) -> bool:
        if sub.filter_type == "all":
            return True
        if d["type"] not in MESSAGE_TYPES and d["type"] != "thread.updated":
            return False
        if info is None:
            return False
        if sub.filter_type == "scope":
            return any(s["type"] == sub.scope["type"] and s["value"] == sub.scope["value"] for s in info["scopes"])
        if sub.filter_type == "mention":
            targets = sub.targets or frozenset({sub.mention})
            return any(r["type"] == "mention" and r["value"] in targets for r in info["refs"])
        return False

    async def _deliver(self, d: dict, info: dict | None, method: str | None = None) -> None:
        delivered = set()
        for sub in list(self.subs.values()):
            conn = sub.conn
            if id(conn) in delivered or not self._matches(sub, d, info):
                continue
            delivered.add(id(conn))
            if sub.buffering is not None:
                sub.buffering.append((d, info, method))
                continue
            conn.notify(method or d["type"], _payload(d, sub))

    async def _thread_updates(self, creates: list[dict], infos: dict) -> None:
        if not self.subs:
            return
        for d in creates:
            thread_id = d.get("thread_id")
            if not thread_id:
                continue
            info = infos.get(d["message_id"])
            delivered = set()
            summaries: dict = {}
            for sub in list(self.subs.values()):
                if id(sub.conn) in delivered or not self._matches(sub, {"type": "thread.updated"}, info):
                    continue
                delivered.add(id(sub.conn))
                if sub.agent not in summaries:
                    summaries[sub.agent] = await self.daemon.store.read(queries.thread_summary, thread_id, sub.agent)
                summary = summaries[sub.agent]
                if summary is None:
                    continue
                payload = {"type": "thread.updated", "timestamp": d["timestamp"], "event_id": d["event_id"],
                           "v": 1, **summary}
                if sub.buffering is not None:
                    continue  # replay reconstructs message events; thread summaries are live-only
                sub.conn.notify("thread.updated", _payload(payload, sub))

    # ------------------------------------------------------------------ resume
    async def _replay(self, sub: Subscription, since: str) -> None:
        if not ev.ULID_RE.fullmatch(since):
            raise errors.ValidationError("invalid params: since_event_id must be an event id (ULID)",
                                         field="since_event_id")
        if self.ring and self.ring[0][0] <= since:
            backlog = [(d, info) for eid, d, info in list(self.ring) if eid > since]
        else:
            backlog = await self.daemon.store.read(_log_backlog, self.daemon.store.log, since)
        for d, info in backlog:
            if self._matches(sub, d, info):
                sub.replayed.add(d["event_id"])
                sub.conn.notify(d["type"], _payload(d, sub, replay=True))
        held, sub.buffering = sub.buffering or [], None
        for d, info, method in held:
            if d["event_id"] not in sub.replayed:
                sub.conn.notify(method or d["type"], _payload(d, sub))
        sub.replayed.clear()

    # ------------------------------------------------------------------ waiting
    async def wait_changed(self, deadline: float) -> bool:
        """Block until something is published or the deadline passes (trio.current_time)."""
        event = self.changed
        with trio.move_on_at(deadline):
            await event.wait()
            return not self.closed
        return False


def _payload(d: dict, sub: Subscription, replay: bool = False) -> dict:
    out = dict(d)
    out["subscription_id"] = sub.id
    if replay:
        out["replay"] = True
    return out


def _role_targets(db, role: str) -> list[str]:
    """Mention targets for a bare role (or a group) name: itself, everyone, groups holding it."""
    groups = [r[0] for r in db.execute_sql(
        "SELECT gm.group_name FROM group_members gm JOIN groups g ON g.name = gm.group_name "
        "WHERE gm.member_type='role' AND gm.member_value=? AND gm.state='add' AND gm.event_id > g.event_id "
        "AND (g.deleted_event_id IS NULL OR g.deleted_event_id < g.event_id)", (role,)).fetchall()]
    return [role, "everyone", *groups]


def _message_tags(db, ids: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for i in range(0, len(ids), 900):
        chunk = ids[i:i + 900]
        q = ",".join("?" * len(chunk))
        for mid, thread, agent in db.execute_sql(
                f"SELECT message_id, thread_id, agent_id FROM messages WHERE message_id IN ({q})", chunk).fetchall():
            out[mid] = {"scopes": [], "refs": [], "thread_id": thread, "agent_id": agent}
        for mid, t, v in db.execute_sql(
                f"SELECT message_id, scope_type, scope_value FROM message_scopes WHERE message_id IN ({q})", chunk):
            if mid in out:
                out[mid]["scopes"].append({"type": t, "value": v})
        for mid, t, v in db.execute_sql(
                f"SELECT message_id, ref_type, ref_value FROM message_refs WHERE message_id IN ({q})", chunk):
            if mid in out:
                out[mid]["refs"].append({"type": t, "value": v})
    return out


def _log_backlog(db, event_log, since: str) -> list[tuple[dict, dict | None]]:
    """Every notifiable event after ``since`` from the log, in event_id order (slow path)."""
    read = event_log.read_all()
    picked = sorted((d for _, d in read.records if d["event_id"] > since and d["type"] in NOTIFY_TYPES),
                    key=lambda d: d["event_id"])
    seen = set()
    unique = []
    for d in picked:
        if d["event_id"] not in seen:
            seen.add(d["event_id"])
            unique.append(d)
    ids = list({d["message_id"] for d in unique if d["type"] in MESSAGE_TYPES})
    infos = _message_tags(db, ids) if ids else {}
    return [(d, infos.get(d.get("message_id", ""))) for d in unique]

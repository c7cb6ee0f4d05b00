"""Which session each agent acts under on this daemon, and the sessions it must end.

Rules:

1. An agent writes under its own active session: the one it names (checked once, then
   remembered), else the one this daemon started or adopted for it, else an active one
   of the projection's, else a new one (`Sessions.ensure`; one start at a time).
2. Sessions this daemon started are noted in ``.thrum/var/local-sessions.json`` (not in
   SQLite: the projection may be rebuilt after a crash). At start-up those still active
   for an agent that may sign here (its key is here and not retired) ended with the
   last daemon's crash (reason ``crash``); at shutdown this daemon ends its own
   (reason ``normal``), for those agents: a retired key's line would count nowhere.
3. A session that ends (here, by a sync, or on request) is forgotten, and the
   subscriptions made in it end with it (``on_ended``: the hub's).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from .. import errors
from .. import events as ev
from ..store import directory
from .writer import Writer

log = logging.getLogger(__name__)

LOCAL_SESSIONS = "local-sessions.json"


class Sessions:
    def __init__(
        self, writer: Writer, can_sign: Callable[[str], bool], var: Path, on_ended: Callable[[str, str], None]
    ):
        """``can_sign(agent)``: whether this machine may sign for ``agent`` now (`Signer.may_sign`)."""
        self._writer = writer
        self._can_sign = can_sign
        self._file = var / LOCAL_SESSIONS
        self._on_ended = on_ended  # (session_id, agent): ends the subscriptions made in it
        self._current: dict[str, str] = {}  # agent -> active session started (or adopted) by this daemon
        self._local: set[str] = set()  # sessions this daemon started (rule 2)
        self._checked: dict[str, str] = {}  # agent -> a session of its own it last wrote under
        self._lock = trio.Lock()

    async def ensure(self, agent: str, session_id: str | None = None) -> str:
        """The agent's active session, started now if it has none.

        Raises:
            NotFound, Forbidden, Conflict: ``session_id`` is given and is not an active
                session of ``agent`` (unknown, another agent's, or ended): an agent
                writes only under its own active session.
        """
        if session_id:
            if session_id not in (self._current.get(agent), self._checked.get(agent)):
                await self._check_own(agent, session_id)
                self._checked[agent] = session_id
            return session_id
        sid = self._current.get(agent)
        if sid:
            return sid
        async with self._lock:
            sid = self._current.get(agent)
            if sid:
                return sid
            active = await self._writer.read(directory.list_sessions, agent, active_only=True)
            if active:
                sid = active[0]["session_id"]
            else:
                start = ev.SessionStart(agent_id=agent)
                await self._writer.write([start])
                sid = start.session_id
                await self.adopt(agent, sid)
            self._current[agent] = sid
            return sid

    async def _check_own(self, agent: str, sid: str) -> None:
        active = await self._writer.read(directory.list_sessions, agent, active_only=True)
        if any(s["session_id"] == sid for s in active):
            return
        info = await self._writer.read(directory.session_info, sid, agent) or await self._writer.read(
            directory.session_info, sid
        )
        if info is None:
            raise errors.NotFound(f"session {sid[:80]} not found; omit session_id to use your active session")
        if info["agent_id"] != agent:
            raise errors.Forbidden(
                f"session {sid} belongs to @{info['agent_id']}, not @{agent}; "
                f"an agent writes only under its own session"
            )
        raise errors.Conflict(f"session {sid} of @{agent} has ended; omit session_id to use your active session")

    async def adopt(self, agent: str, sid: str) -> None:
        """Make ``sid`` the agent's current session on this daemon (it ends when the daemon stops)."""
        self._current[agent] = sid
        self._local.add(sid)
        await trio.to_thread.run_sync(self._save)

    def ended(self, agent: str, sid: str) -> None:
        """``agent``'s session ``sid`` ended: forget it, and end the subscriptions made in it."""
        self._forget_session(agent, sid)
        self._on_ended(sid, agent)

    def _forget_session(self, agent: str, sid: str) -> None:
        if self._current.get(agent) == sid:
            del self._current[agent]
        if self._checked.get(agent) == sid:
            del self._checked[agent]

    def forget(self, agent: str) -> None:
        """A removed agent: none of its sessions is current here any more."""
        self._current.pop(agent, None)
        self._checked.pop(agent, None)

    async def on_applied(self, applied: list[dict[str, Any]], source: str) -> None:
        """Writer subscriber: a session that ended elsewhere (a sync) is no longer checked."""
        for d in applied:
            if d["type"] == "agent.session.end" and self._checked.get(d.get("agent_id") or "") == d["session_id"]:
                del self._checked[d["agent_id"]]

    # ------------------------------------------------------------------ start and stop (rule 2)
    async def end_orphaned(self) -> None:
        """Sessions this machine started that no daemon ended: the last daemon crashed."""
        orphans = []
        for sid in await trio.to_thread.run_sync(self._load):
            for s in await self._writer.read(directory.sessions_named, sid):  # each agent's own row
                if s["active"] and self._can_sign(s["agent_id"]):
                    orphans.append(ev.SessionEnd(session_id=sid, agent_id=s["agent_id"], reason="crash"))
        if orphans:
            log.info("marking %d orphaned sessions as crashed", len(orphans))
            await self._writer.write(orphans)
        self._local.clear()
        await trio.to_thread.run_sync(self._save)

    async def end_local(self) -> None:
        """At shutdown: end the sessions this daemon holds for agents whose key is here."""
        ends = [
            ev.SessionEnd(session_id=sid, agent_id=agent, reason="normal")
            for agent, sid in self._current.items()
            if self._can_sign(agent)
        ]
        self._current.clear()
        if ends:
            await self._writer.write(ends)
        self._local.clear()
        await trio.to_thread.run_sync(self._save)

    def _save(self) -> None:
        tmp = self._file.with_name(f".local-sessions.{threading.get_ident()}.tmp")  # one per thread: saves may overlap
        tmp.write_text(json.dumps(sorted(self._local)))
        os.replace(tmp, self._file)

    def _load(self) -> list[str]:
        try:
            data = json.loads(self._file.read_text())
        except (OSError, ValueError):
            return []
        return [s for s in data if isinstance(s, str)] if isinstance(data, list) else []

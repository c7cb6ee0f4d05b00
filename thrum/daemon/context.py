"""What an RPC service may use of the daemon: the narrow context every handler gets.

A service (thrum/daemon/service/) validates params, reads through `read`, writes
events through `write` and replies. It never holds the daemon itself, so what a
service can reach is this list:

- the store: `read` runs a query function of `thrum.store` (``fn(db, ...)``) in a
  worker thread; `write` hands events to the single writer and returns once they
  are durable and folded;
- who is acting: `caller` (which also marks the agent as seen), `agent`,
  `forget_agent`, `resolve_addresses` (cached), `with_last_seen`, `flush_last_seen`;
- keys: `has_key`, `trusted_key`, `ensure_key`, `local_agents`, `name_conflicts`;
- the team root (issue 25): `team` (the root in effect and the roster), `waiting_keys`,
  `rotate_local_key`;
- sessions: `ensure_session`, `adopt_session`, `session_ended` (which also ends
  the session's subscriptions);
- `hub` (subscriptions), `sync` (the sync loop), `delivery` (delivered receipts),
  `waker` (idle wake-ups) and `web_ui` (thrum.ui): None until started;
- `config`, `status`, `uptime`, `request_shutdown`;
- for `thrum doctor`: `main_repo`, and `inspect_log` (the log and its stored read
  positions, under the writer's lock).
"""

from __future__ import annotations

import time
from pathlib import Path

import trio
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..config import Config
from ..store.log import EventLog, Position
from ..store.projection import FoldResult, load_positions
from .params import Params

if TYPE_CHECKING:
    from ..events import Event
    from .delivery import DeliveryRecorder
    from .wakeups import Waker
    from .hub import Hub
    from .idempotency import KeyedWrites
    from .server import Daemon
    from .syncer import SyncLoop

T = TypeVar("T")


class ServiceContext:
    __slots__ = ("_daemon",)

    def __init__(self, daemon: Daemon):
        self._daemon = daemon

    # ------------------------------------------------------------------ the store
    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(db, *args, **kwargs)`` in a worker thread (SQLite never runs on the event loop)."""
        return await self._daemon.writer.read(fn, *args, **kwargs)

    async def write_local(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(db, ...)`` writing local state that is not in the log (liveness), under the
        writer's lock (a write outside it can fail a fold in flight: "database is locked")."""
        return await self._daemon.writer.write_local(fn, *args, **kwargs)

    async def write(self, events: list[Event]) -> FoldResult:
        """Append ``events`` durably and fold them (group commit); returns once they are."""
        return await self._daemon.writer.write(events)

    # ------------------------------------------------------------------ who is acting
    async def caller(self, params: Params, key: str = "caller") -> str:
        """The registered agent named by ``params[key]`` (default: the repository's
        single identity; none or several is an error naming the param)."""
        return await self._daemon.caller(params, key)

    async def agent(self, name: str, *, refresh: bool = False) -> dict | None:
        """A live agent's directory entry (cached), or None."""
        return await self._daemon.agent(name, refresh=refresh)

    async def registration_id(self, name: str) -> str:
        """An event id for a registration of ``name`` that wins over its last removal."""
        from .callers import registration_id

        return await registration_id(self._daemon.writer, name)

    def forget_agent(self, name: str) -> None:
        self._daemon.forget_agent(name)

    def with_last_seen(self, agents: list[dict]) -> list[dict]:
        """agent.list items with the one ``status`` their ``last_seen_at`` gives (in place)."""
        presence = self._daemon.presence
        return presence.overlay(agents) if presence is not None else agents

    async def flush_last_seen(self) -> None:
        """Write the heartbeats due now (before a query that filters on last seen)."""
        if self._daemon.presence is not None:
            await self._daemon.presence.flush()

    async def resolve_addresses(self, addresses: list[str]) -> list[dict]:
        return await self._daemon.resolve_addresses(addresses)

    # ------------------------------------------------------------------ keys (thrum.trust)
    def has_key(self, agent: str) -> bool:
        """True when this machine holds ``agent``'s private key (it can act for it)."""
        return self._daemon.keys.get(agent, fresh=True) is not None

    def trusted_key(self, agent: str) -> str | None:
        """The base64 key this replica trusts for ``agent`` (local or first seen), or None."""
        ring = self._daemon.ring
        key = ring.key(agent) if ring is not None else None
        return key.b64 if key is not None else None

    async def ensure_key(self, agent: str) -> tuple[str, bool]:
        """(public key, created now) of ``agent``, making its key pair when it has none here."""
        keys = self._daemon.keys
        had = await trio.to_thread.run_sync(lambda: keys.get(agent, fresh=True))
        if had is not None:
            return had[1].b64, False
        _, public = await trio.to_thread.run_sync(keys.create, agent)
        return public.b64, True

    @property
    def team(self) -> Any:
        """The daemon's `thrum.daemon.team.TeamState` (root in effect, roster, status)."""
        return self._daemon.team

    def waiting_keys(self, name: str) -> list[str]:
        """Keys of registrations of ``name`` waiting for an admission here."""
        fold = self._daemon.fold_verified
        return fold.waiting_keys(name) if fold is not None else []

    async def rotate_local_key(self, name: str, private: Any) -> str:
        """Put ``private`` in place of ``name``'s key (the old file kept beside it); its base64 public key."""
        from ..trust.keys import rotate_file

        keys = self._daemon.keys
        _, new, _ = await trio.to_thread.run_sync(rotate_file, keys, name, private)
        return new.b64

    async def name_conflicts(self) -> list[dict]:
        """Agent names this replica has seen registered with two keys (`thrum.trust.conflicts`)."""
        from ..trust.conflicts import report

        ring = self._daemon.ring
        if ring is None:
            return []
        found = await trio.to_thread.run_sync(ring.conflicts)
        here = {}
        for name, entry in found.items():
            if entry["local"] and entry["keys"]:
                info = await self._daemon.agent(name)
                if info is not None:
                    here[name] = info.get("registered_at") or ""
        return report(found, here)

    def local_agents(self) -> list[str]:
        """Names whose private key is on this machine."""
        return self._daemon.keys.names()

    def new_message_id(self, agent: str) -> str:
        """A message id bound to ``agent``'s key (docs/design/trust.md)."""
        return self._daemon.writer.signer.new_message_id(agent)

    # ------------------------------------------------------------------ sessions
    async def ensure_session(self, agent: str, session_id: str | None = None) -> str:
        return await self._daemon.ensure_session(agent, session_id)

    async def adopt_session(self, agent: str, session_id: str) -> None:
        await self._daemon.adopt_session(agent, session_id)

    def session_ended(self, agent: str, session_id: str) -> None:
        """Forget the agent's current session and end the subscriptions made in it."""
        self._daemon.session_ended(agent, session_id)
        if self._daemon.hub is not None:
            self._daemon.hub.session_ended(session_id, agent)

    # ------------------------------------------------------------------ realtime, sync, admin
    @property
    def hub(self) -> Hub | None:
        return self._daemon.hub

    @property
    def delivery(self) -> DeliveryRecorder | None:
        """Records *delivered* for this machine's agents (thrum.daemon.delivery): None until started."""
        return getattr(self._daemon, "delivery", None)  # set by thrum.daemon.extensions

    @property
    def waker(self) -> Waker | None:
        """Idle wake-ups in tmux (thrum.daemon.wakeups): None until started."""
        return getattr(self._daemon, "waker", None)  # set by thrum.daemon.extensions

    @property
    def web_ui(self) -> Any:
        """The Web UI (thrum.ui.hook.WebUi): None in a daemon without one."""
        return getattr(self._daemon, "web_ui", None)

    @property
    def sync(self) -> SyncLoop | None:
        return self._daemon.sync

    @property
    def keyed(self) -> KeyedWrites:
        """Idempotency keys: `KeyedWrites.once` runs a keyed write at most once."""
        return self._daemon.keyed

    @property
    def config(self) -> Config:
        return self._daemon.config

    def status(self) -> dict:
        return self._daemon.status()

    def uptime(self) -> float:
        """Seconds since the daemon started (monotonic)."""
        return time.monotonic() - self._daemon.started_mono

    def request_shutdown(self) -> None:
        self._daemon.request_shutdown()

    # ------------------------------------------------------------------ doctor (issue 12)
    @property
    def main_repo(self) -> Path:
        """The user's repository, for the git checks of `thrum doctor`."""
        return self._daemon.paths.main_repo

    async def inspect_log(self, fn: Callable[[EventLog, dict[str, Position]], T]) -> T:
        """``fn(event_log, stored read positions)`` in a worker thread, while no append,
        fold or merge runs (the writer's lock), so nothing is seen half-written."""
        writer = self._daemon.writer
        async with writer.lock:
            positions = await writer.read(load_positions)
            return await trio.to_thread.run_sync(fn, writer.log, positions)

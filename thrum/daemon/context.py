"""What an RPC service may use of the daemon: the record of parts every handler gets.

A service (thrum/daemon/service/) validates params, reads through ``store.read``,
writes events through ``store.write`` and replies. It never holds the daemon itself:
what a service can reach is this record, made once by the composition root
(`thrum.daemon.server`) from the parts it started:

- ``store``: `read` runs a query function of `thrum.store` (``fn(db, ...)``) in a
  worker thread; `write` hands events to the single writer and returns once they are
  durable and folded; `write_local` (liveness, never the log); `inspect_log` (doctor);
- ``agents`` (who acts: `caller`, `get`, `forget`, `registration_id`), ``sessions``
  (`ensure`, `adopt`, `ended`), ``presence`` (last seen: `overlay`, `flush`),
  ``addresses`` (`resolve`, cached, one fetch for an unknown one);
- ``keys`` (this machine's keys, the ring, waiting registrations, message ids) and
  ``team`` (the team root in effect and its roster, issue 25);
- ``hub`` (subscriptions), ``sync`` (the sync loop), ``delivery`` (delivered receipts),
  ``waker`` (idle wake-ups), ``web_ui`` (the Web UI plugin, None in a daemon without one);
- ``keyed`` (idempotency keys), ``config``, ``main_repo`` (doctor's git checks),
  and the daemon's own ``status``, ``uptime`` and ``request_shutdown``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..config import Config

if TYPE_CHECKING:
    from ..events import Event
    from ..store.log import EventLog, Position
    from ..store.projection import FoldResult
    from .addresses import AddressBook
    from .callers import Agents
    from .delivery import DeliveryRecorder
    from .hub import Hub
    from .idempotency import KeyedWrites
    from .keys import Keys
    from .plugins import UiPlugin
    from .presence import Presence
    from .sessions import Sessions
    from .syncer import SyncLoop
    from .team import TeamState
    from .wakeups import Waker

T = TypeVar("T")


class Store(Protocol):
    """The single writer as a service sees it (`thrum.daemon.writer.Writer`)."""

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(db, *args, **kwargs)`` in a worker thread (SQLite never runs on the event loop)."""
        ...

    async def write(self, events: Sequence[Event | dict[str, Any]]) -> FoldResult:
        """Append ``events`` durably and fold them (group commit); returns once they are."""
        ...

    async def write_local(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(db, ...)`` writing local state that is not in the log (liveness), under the
        writer's lock (a write outside it can fail a fold in flight: "database is locked")."""
        ...

    async def inspect_log(self, fn: Callable[[EventLog, dict[str, Position]], T]) -> T:
        """``fn(event_log, stored read positions)`` while no append, fold or merge runs."""
        ...


@dataclass(frozen=True)
class ServiceContext:
    store: Store
    agents: Agents
    sessions: Sessions
    presence: Presence
    addresses: AddressBook
    keys: Keys
    team: TeamState
    hub: Hub
    sync: SyncLoop
    delivery: DeliveryRecorder
    waker: Waker
    web_ui: UiPlugin | None
    keyed: KeyedWrites
    config: Config
    main_repo: Path
    status: Callable[[], dict[str, Any]]
    uptime: Callable[[], float]
    request_shutdown: Callable[[], None]

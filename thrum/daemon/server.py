"""The daemon: one per repository, one trio nursery for every server and task, and the
composition root that makes its parts and hands each what it uses.

Start-up order: take the flock (a second daemon stops here; `thrum.daemon.process`),
write the pid file, tune the process, open the store (`thrum.daemon.startup`: the
``a-sync`` worktree, the team root, the projection caught up with the log), make the
parts, run the writer, end sessions orphaned by a crash, start the hub, the Web UI
plugin, the WebSocket, the sync loop, delivery receipts, wake-ups and the held-lines
timer, then listen on the Unix socket. Shutdown (SIGTERM/SIGINT or ``daemon.stop``):
stop the sync loop and the hub, flush queued writes, end this daemon's sessions with
reason ``normal``, write the last-seen marks, remove socket and pid file.

No part holds the daemon or sets another part's attributes: each gets what it uses
through its constructor, services get the `ServiceContext` record, the transports a
`Serving` record, plugins a `PluginHost` (docs/design/architecture.md, "The daemon's
parts").
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .. import __version__, config as config_mod
from ..paths import ThrumPaths
from ..store.projection import Progress
from ..trust.keys import LocalKeys
from ..trust.resolve import prefer_verified
from . import service  # noqa: F401  (registers every RPC method)
from . import unix, ws
from .addresses import AddressBook
from .callers import Agents
from .checkout import watch_checkout
from .connection import Connection
from .context import ServiceContext
from .delivery import DeliveryRecorder
from .heldtimer import HeldTimer
from .hub import Hub
from .replay_ring import RING_BYTES, RING_SIZE
from .idempotency import KeyedWrites
from .keys import Keys
from .limits import Limits, Registry
from .plugins import Plugin, PluginHost, load_plugins, web_ui
from .presence import Presence
from .process import ProcessFiles, tune_process
from .serving import Serving
from .sessions import Sessions
from .startup import Store, open_store
from .syncer import SyncLoop
from .wakeups import Waker
from .writer import Writer

if TYPE_CHECKING:
    from ..sync.gitstore.api import GitStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Parts:
    """Everything `Daemon.run` made, in the order it starts them."""

    store: Store
    presence: Presence
    hub: Hub
    sessions: Sessions
    agents: Agents
    sync: SyncLoop
    addresses: AddressBook
    delivery: DeliveryRecorder
    waker: Waker
    plugins: list[Plugin]
    registry: Registry


class Daemon:
    def __init__(self, paths: ThrumPaths, *, git_store: Callable[[Path], GitStore] | None = None):
        """``git_store``: opens the sync worktree's git store (None: the repository's;
        tests of the daemon's sync cycles give the in-memory fake: `SyncLoop`)."""
        self.paths = paths
        self._git_store = git_store
        self.config = config_mod.load(paths.config)  # a bad config fails here, before the flock
        if unknown := config_mod.unknown_keys(paths.config):
            log.warning("%s", config_mod.unknown_keys_text(unknown))
        self.started_at = time.time()
        self.started_mono = time.monotonic()
        self.keys = LocalKeys(paths.identities)  # private keys of this machine's identities (thrum.trust)
        self.keyed = KeyedWrites()  # idempotency keys of writes in flight and recent results
        self.connections: set[Connection] = set()  # open client connections of both transports
        self.checkout_gone = False  # the repository was deleted under the daemon: nothing left to write to
        self.ws_port: int | None = None
        self.writer: Writer | None = None  # the single writer, once the store is open
        self.services: ServiceContext | None = None  # what RPC handlers get, once every part is made
        self._process = ProcessFiles(paths)
        self._parts: Parts | None = None
        self._shutdown = trio.Event()

    # ------------------------------------------------------------------ what services see of the daemon itself
    def status(self) -> dict[str, Any]:
        parts, writer = self._parts, self.writer
        return {
            "running": True,
            "pid": os.getpid(),
            "uptime": round(self.uptime(), 3),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "socket": str(self.paths.socket),
            "repo": str(self.paths.main_repo),
            "worktree": str(parts.store.worktree) if parts else None,
            "version": __version__,
            "ws_port": self.ws_port,
            "connections": len(self.connections),
            "clients": parts.registry.status() if parts else None,
            "view": writer.view.status() if writer else None,
            "events_written": writer.events_written if writer else 0,
            "write_batches": writer.batches_written if writer else 0,
        }

    def uptime(self) -> float:
        """Seconds since the daemon started (monotonic)."""
        return time.monotonic() - self.started_mono

    def request_shutdown(self) -> None:
        self._shutdown.set()

    # ------------------------------------------------------------------ the parts
    def _make_parts(self, store: Store, nursery: trio.Nursery, descriptors: int) -> Parts:
        """Every part, each from what it uses; nothing starts here."""
        cfg, writer = self.config, store.writer
        presence = Presence(  # heartbeats (thrum.daemon.presence)
            writer,
            interval=float(cfg.presence_interval),
            can_sign=store.signer.may_sign,
        )
        hub = Hub(
            writer.read,
            writer.log,
            nursery,
            ring_size=int(cfg.values.get("subscription_ring_size") or RING_SIZE),
            ring_bytes=int(cfg.values.get("subscription_ring_bytes") or RING_BYTES),
        )
        sessions = Sessions(writer, store.signer.may_sign, self.paths.var, hub.session_ended)
        agents = Agents(writer, self.keys, self.paths.identities, presence, sessions)
        sync = SyncLoop(
            cfg,
            self.paths,
            store.worktree,
            writer,
            store.team,
            prefer_verified(store.ring),
            nursery,
            git_store=self._git_store,
        )
        addresses = AddressBook(writer.read, sync, self.paths)
        delivery = DeliveryRecorder(writer.read, writer.write, store.signer.signing_agents)
        waker = Waker(writer.read, delivery.flush, self.paths.var / "panes.json")
        # subscribed connections are never evicted as idle
        registry = Registry(Limits.from_config(cfg.values, descriptors), served=hub.served)
        plugins = load_plugins(self.paths, cfg)
        return Parts(store, presence, hub, sessions, agents, sync, addresses, delivery, waker, plugins, registry)

    def _services(self, parts: Parts) -> ServiceContext:
        store = parts.store
        return ServiceContext(
            store=store.writer,
            agents=parts.agents,
            sessions=parts.sessions,
            presence=parts.presence,
            addresses=parts.addresses,
            keys=Keys(self.keys, store.ring, store.fold, store.signer, parts.agents),
            team=store.team,
            hub=parts.hub,
            sync=parts.sync,
            delivery=parts.delivery,
            waker=parts.waker,
            web_ui=web_ui(parts.plugins),
            keyed=self.keyed,
            config=self.config,
            main_repo=self.paths.main_repo,
            status=self.status,
            uptime=self.uptime,
            request_shutdown=self.request_shutdown,
        )

    # ------------------------------------------------------------------ lifecycle
    async def run(
        self,
        *,
        ready: Callable[[], None] | None = None,
        progress: Progress | None = None,
        task_status: trio.TaskStatus[Daemon] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until SIGTERM/SIGINT or `request_shutdown`. ``ready()``: once it listens;
        ``progress``: told how far a start-up rebuild is (`projection.Progress`)."""
        self._process.take_lock()
        try:
            self._process.write_pid()
            descriptors = tune_process()
            store = await trio.to_thread.run_sync(partial(open_store, self.paths, self.config, self.keys, progress))
            self.writer = writer = store.writer
            async with trio.open_nursery() as nursery:
                parts = self._parts = self._make_parts(store, nursery, descriptors)
                services = self.services = self._services(parts)
                serving = Serving(services, parts.registry, parts.hub, self.connections, self.config.ws_queue_size)
                for forget in (parts.sessions.on_applied, parts.agents.on_applied, parts.addresses.on_applied):
                    writer.subscribe(forget)  # caches first: everyone after them sees fresh state
                await nursery.start(writer.run_writer)
                await nursery.start(writer.view.run)
                await nursery.start(parts.presence.run)
                await writer.after_facts()  # a team root adopted or changed while stopped
                await parts.sessions.end_orphaned()
                await self._start_parts(parts, serving, nursery)
                await nursery.start(unix.serve_unix, serving, self.paths.socket)
                self._process.listening()
                if store.upgrading:
                    nursery.start_soon(self._upgrade, store)
                await nursery.start(self._watch_signals)  # installed before we announce readiness
                nursery.start_soon(watch_checkout, self.paths.main_repo, self._checkout_gone)
                log.info("thrum daemon %s ready (pid %d, socket %s)", __version__, os.getpid(), self.paths.socket)
                if ready is not None:
                    ready()
                task_status.started(self)
                await self._shutdown.wait()
                log.info("shutting down")
                await parts.sync.stop()
                parts.hub.close()
                if not self.checkout_gone:  # else the log and the database went with the checkout
                    await writer.flush_pending()
                    await parts.sessions.end_local()
                    await parts.presence.flush()
                nursery.cancel_scope.cancel()
        finally:
            if self.writer is not None:
                self.writer.close()
            try:
                os.unlink(self.paths.socket)
            except OSError:
                pass
            self._process.release()
            log.info("stopped")

    async def _upgrade(self, store: Store) -> None:
        """Rebuild the outdated projection beside the one being served, then swap it in (issue 29)."""
        try:
            await store.writer.view.rebuild("the projection's schema changed", corrupt=False)
        except Exception as exc:  # noqa: BLE001 - the old projection keeps serving; say so, retry at the next start
            log.error("rebuilding the projection for this version failed (%s); serving the old one", exc)
            store.writer.view.fell_behind(exc)
            return
        store.fold.release()  # the verdicts the rebuild loaded

    async def _start_parts(self, parts: Parts, serving: Serving, nursery: trio.Nursery) -> None:
        """The hub, the plugins and the WebSocket, the sync loop, delivery receipts, wake-ups,
        the held-lines timer: each subscribed to the writer in this order."""
        writer = parts.store.writer
        writer.subscribe(parts.hub.publish)
        browser = next((p.browser for p in parts.plugins if p.browser is not None), None)
        self.ws_port = port = await nursery.start(partial(ws.serve_ws, serving, self.config, self.paths, browser))
        host = PluginHost(nursery, parts.registry, port)
        for plugin in parts.plugins:  # an open page's session outlives a restart: the UI listens where it expects
            await plugin.start(host)
        await nursery.start(parts.sync.run)  # subscribes itself once its replicator is made
        writer.subscribe(parts.delivery.on_applied)
        await nursery.start(parts.delivery.run)
        writer.subscribe(parts.waker.on_applied)
        await nursery.start(parts.waker.run)
        await nursery.start(HeldTimer(writer, parts.store.fold, float(self.config.clock_skew)).run)

    def _checkout_gone(self) -> None:
        log.warning("the checkout %s is gone; stopping", self.paths.main_repo)
        self.checkout_gone = True
        self.request_shutdown()

    async def _watch_signals(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            task_status.started()
            async for _ in signals:
                self.request_shutdown()
                return

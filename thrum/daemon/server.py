"""The daemon: one per repository, one trio nursery for every server and task.

Start-up order: take the flock (a second daemon stops here), write the pid file,
make sure the ``a-sync`` worktree exists, open (or rebuild) the projection and
catch up from the log, end sessions orphaned by a crash, then listen. Shutdown
(SIGTERM/SIGINT or ``daemon.stop``): stop listening, flush queued writes, end
this daemon's sessions with reason ``normal``, remove socket and pid file.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

import trio

from .. import __version__, config as config_mod, errors
from .. import events as ev
from ..paths import ThrumPaths
from .checkout import watch_checkout
from ..store import directory
from ..store.projection import Progress, open_projection
from ..store.log import EventLog
from ..sync.gitstore.gitlib import bound_object_cache
from ..trust.binding import LogBinding
from .team import open_trust
from ..trust.keys import LocalKeys
from ..trust.ring import KeyRing
from . import service  # noqa: F401  (registers every RPC method)
from . import callers, unix
from .addresses import AddressBook
from .context import ServiceContext
from .idempotency import KeyedWrites
from .limits import Limits, Registry, give_back_memory, raise_descriptor_limit, tune_allocator
from .presence import Presence
from .params import Params
from .signer import Signer
from .starter import RebuildReports, tell_starter
from .writer import Writer

log = logging.getLogger(__name__)


class AlreadyRunning(errors.ThrumError):
    pass


class Daemon:
    def __init__(self, paths: ThrumPaths):
        self.paths = paths
        self.config = config_mod.load(paths.config)
        if unknown := config_mod.unknown_keys(paths.config):
            log.warning("%s", config_mod.unknown_keys_text(unknown))
        self.started_at = time.time()
        self.started_mono = time.monotonic()
        self.connections: set = set()
        self.registry = Registry(Limits.from_config(self.config.values))  # refitted in run()
        self.writer: Writer | None = None  # the single writer (thrum.daemon.writer), set in run()
        self.keys = LocalKeys(paths.identities)  # private keys of this machine's identities (thrum.trust)
        self.ring: KeyRing | None = None  # keys this replica trusts, set in run()
        self.team = None  # thrum.daemon.team.TeamState, set in run()
        self.worktree: Path | None = None
        self.hub = None  # subscriptions (thrum.daemon.hub), set in run()
        self.sync = None  # sync loop (thrum.daemon.syncer), set in run()
        self.ws_port: int | None = None
        self._lock_fd: int | None = None
        self._progress: Progress | None = None  # told how far a start-up rebuild is
        self._agents_cache: dict[str, dict] = {}
        self._sessions: dict[str, str] = {}  # agent -> active session started by this daemon
        self._local_sessions: set[str] = set()
        self._checked_sessions: dict[str, str] = {}  # agent -> a session of its own it last wrote under
        self.addresses = AddressBook(self)
        self.presence: Presence | None = None  # heartbeats (thrum.daemon.presence), set with the writer
        self._session_lock = trio.Lock()
        self.nursery: trio.Nursery | None = None
        self._shutdown = trio.Event()
        self.checkout_gone = False  # the repository was deleted under the daemon: nothing left to write to
        self.keyed = KeyedWrites()  # idempotency keys of writes in flight and recent results
        self.services = ServiceContext(self)  # what RPC handlers may use (thrum.daemon.context)

    # ------------------------------------------------------------------ identity helpers
    async def agent(self, name: str, *, refresh: bool = False) -> dict | None:
        if not refresh and name in self._agents_cache:
            return self._agents_cache[name]
        info = await self.writer.read(directory.get_agent, name)
        if info is not None and not info.get("deleted"):
            self._agents_cache[name] = info
            return info
        self._agents_cache.pop(name, None)
        return None

    async def resolve_addresses(self, addresses: list[str]) -> list[dict]:
        """Resolve ``to``/``mentions`` addresses (cached; one fetch from the remote when
        one is unknown: `thrum.daemon.addresses`).

        Raises:
            UnknownRecipient: an address names no agent, role or group (with close matches).
        """
        return await self.addresses.resolve(addresses)

    async def _invalidate_caches(self, applied: list[dict], source: str) -> None:
        for d in applied:
            if d["type"] == "agent.session.end" and self._checked_sessions.get(d.get("agent_id")) == d["session_id"]:
                del self._checked_sessions[d["agent_id"]]
        if any(d["type"].startswith(("agent.register", "agent.cleanup", "group.")) for d in applied):
            self.addresses.clear()
            for d in applied:
                if d["type"] in ("agent.register", "agent.cleanup"):
                    self._agents_cache.pop(d["agent_id"], None)

    def forget_agent(self, name: str) -> None:
        self._agents_cache.pop(name, None)
        self._sessions.pop(name, None)
        self._checked_sessions.pop(name, None)
        if self.presence is not None:
            self.presence.forget(name)

    async def caller(self, p: Params, key: str = "caller") -> str:
        """The acting agent named in params; must be registered. Marks it as seen, unless the
        call only watches (`Params.observing`: the Web UI, or ``observe: true``).

        Without ``caller`` the repository's single agent identity acts, as in the CLI
        (`thrum.identity` rule 4); with none or several, the error names the param.
        An agent removed while its key is here is registered again (`callers.bring_back`).
        """
        name = p.str(key)
        if name is None:
            name = await callers.default_caller(self.paths.identities, key)
        if not ev.NAME_RE.fullmatch(name):
            raise errors.ValidationError(f"invalid params: {key} {name[:60]!r} is not an agent name", field=key)
        if await self.agent(name) is None and not (  # reads the database on a cache miss
            await callers.bring_back(self.writer, self.keys, name) and await self.agent(name, refresh=True)
        ):
            raise errors.IdentityError(
                f"unknown agent {name!r}: register it first with "
                f"`thrum quickstart --name {name} --role ROLE --module MODULE`"
            )
        if self.presence is not None and not p.observing:
            self.presence.touch(name)
        return name

    async def ensure_session(self, agent: str, session_id: str | None = None) -> str:
        """The agent's active session, started now if it has none.

        Raises:
            NotFound, Forbidden, Conflict: ``session_id`` is given and is not an active
                session of ``agent`` (unknown, another agent's, or ended): an agent
                writes only under its own active session.
        """
        if session_id:
            if session_id not in (self._sessions.get(agent), self._checked_sessions.get(agent)):
                await self._check_own_session(agent, session_id)
                self._checked_sessions[agent] = session_id
            return session_id
        sid = self._sessions.get(agent)
        if sid:
            return sid
        async with self._session_lock:
            sid = self._sessions.get(agent)
            if sid:
                return sid
            active = await self.writer.read(directory.list_sessions, agent, active_only=True)
            if active:
                sid = active[0]["session_id"]
            else:
                start = ev.SessionStart(agent_id=agent)
                await self.writer.write([start])
                sid = start.session_id
                await self.adopt_session(agent, sid)
            self._sessions[agent] = sid
            return sid

    async def _check_own_session(self, agent: str, sid: str) -> None:
        active = await self.writer.read(directory.list_sessions, agent, active_only=True)
        if any(s["session_id"] == sid for s in active):
            return
        info = await self.writer.read(directory.session_info, sid, agent) or await self.writer.read(
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

    async def adopt_session(self, agent: str, sid: str) -> None:
        """Make ``sid`` the agent's current session on this daemon (it ends when the daemon stops)."""
        self._sessions[agent] = sid
        await self._remember_local_session(sid)

    async def _remember_local_session(self, sid: str) -> None:
        """Note a session this daemon started, so a crash can be detected on next start.

        Kept in a file, not in SQLite: the projection may be rebuilt after a crash.
        """
        self._local_sessions.add(sid)
        await trio.to_thread.run_sync(self._save_local_sessions)

    def _save_local_sessions(self) -> None:
        path = self.paths.var / "local-sessions.json"
        tmp = path.with_name(f".local-sessions.{threading.get_ident()}.tmp")  # one per thread: saves may overlap
        tmp.write_text(json.dumps(sorted(self._local_sessions)))
        os.replace(tmp, path)

    def _load_local_sessions(self) -> list[str]:
        try:
            data = json.loads((self.paths.var / "local-sessions.json").read_text())
        except (OSError, ValueError):
            return []
        return [s for s in data if isinstance(s, str)] if isinstance(data, list) else []

    def session_ended(self, agent: str, sid: str) -> None:
        if self._sessions.get(agent) == sid:
            del self._sessions[agent]
        if self._checked_sessions.get(agent) == sid:
            del self._checked_sessions[agent]

    async def connection_closed(self, conn) -> None:
        if self.hub is not None:
            self.hub.connection_closed(conn)

    def status(self) -> dict:
        return {
            "running": True,
            "pid": os.getpid(),
            "uptime": round(time.monotonic() - self.started_mono, 3),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "socket": str(self.paths.socket),
            "repo": str(self.paths.main_repo),
            "worktree": str(self.worktree) if self.worktree else None,
            "version": __version__,
            "ws_port": self.ws_port,
            "connections": len(self.connections),
            "clients": self.registry.status(),
            "view": self.writer.view.status() if self.writer else None,
            "events_written": self.writer.events_written if self.writer else 0,
            "write_batches": self.writer.batches_written if self.writer else 0,
        }

    def request_shutdown(self) -> None:
        self._shutdown.set()

    # ------------------------------------------------------------------ lifecycle
    def _take_lock(self) -> None:
        self.paths.var.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.paths.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = self.paths.recorded_pid()
            raise AlreadyRunning(f"thrum daemon is already running (pid {pid})") from None
        self._lock_fd = fd
        # Held until the socket listens: a starter that found this daemon already
        # running waits on it (lifecycle.start) instead of connecting too early.
        starting = os.open(self.paths.starting_lock, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(starting, fcntl.LOCK_EX)
        self._starting_fd: int | None = starting

    def _listening(self) -> None:
        fd, self._starting_fd = getattr(self, "_starting_fd", None), None
        if fd is not None:
            os.close(fd)  # releases the starting lock

    def _write_pid(self) -> None:
        tmp = self.paths.pid_file.with_suffix(".tmp")
        tmp.write_text(f"{os.getpid()}\n")
        os.replace(tmp, self.paths.pid_file)

    def _cleanup_files(self) -> None:
        for p in (self.paths.pid_file, self.paths.ws_port_file):
            try:
                if p == self.paths.pid_file and self.paths.recorded_pid() != os.getpid():
                    continue
                p.unlink()
            except FileNotFoundError:
                pass
        self._listening()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _open_store(self) -> None:
        from ..sync import offline as sync_record
        from ..sync.verifyrange import committed_log_id
        from ..sync.transport.credentials import credentials_from_env, remote_callbacks
        from ..sync.worktree import ensure_sync_worktree

        callbacks = None if self.config.local_only else remote_callbacks(credentials_from_env(self.config.values))
        self.worktree = ensure_sync_worktree(self.paths.main_repo, self.config.remote, callbacks=callbacks)
        event_log = EventLog(self.worktree)
        self.ring = KeyRing(self.paths.var / "known_keys.json", self.keys)
        root, remote = self.paths.main_repo, self.config.remote  # the team root's log id, read again every 5 s
        self.log_binding = LogBinding(read=lambda: committed_log_id(root, remote))
        self.team, self.fold_verified = open_trust(self.paths, self.config, self.ring, self.log_binding, event_log)
        db = open_projection(self.paths.database, event_log, self.fold_verified, progress=self._progress)
        if self.team.judged_blob() != self.team.blob:  # a root adopted, changed or removed while stopped
            self.fold_verified.ask_rejudge("the team root changed")
        self.writer = Writer(
            db, event_log, Signer(self.keys, self.log_binding.get), self.fold_verified, db_path=self.paths.database
        )
        self.writer.ensure_covered(sync_record.take_reread(self.paths))  # what an offline sync merged into
        self.fold_verified.release()
        give_back_memory()  # the catch-up's peak (a large history, the verdict memory) goes back
        self.writer.subscribers.append(self._invalidate_caches)
        self.writer.on_rejudged.append(self.team.mark_judged)
        self.presence = Presence(  # heartbeats (thrum.daemon.presence)
            self.writer,
            interval=float(self.config.presence_interval),
            can_sign=lambda agent: self.keys.get(agent) is not None,
        )

    async def _end_orphaned_sessions(self) -> None:
        """Sessions this machine started that no daemon ended: the last daemon crashed."""
        orphans = []
        for sid in await trio.to_thread.run_sync(self._load_local_sessions):
            for s in await self.writer.read(directory.sessions_named, sid):  # each agent's own row
                if s["active"] and self.keys.get(s["agent_id"]) is not None:
                    orphans.append(ev.SessionEnd(session_id=sid, agent_id=s["agent_id"], reason="crash"))
        if orphans:
            log.info("marking %d orphaned sessions as crashed", len(orphans))
            await self.writer.write(orphans)
        self._local_sessions.clear()
        await trio.to_thread.run_sync(self._save_local_sessions)

    async def _end_local_sessions(self) -> None:
        ends = [
            ev.SessionEnd(session_id=sid, agent_id=agent, reason="normal")
            for agent, sid in self._sessions.items()
            if self.keys.get(agent) is not None
        ]
        self._sessions.clear()
        if ends:
            await self.writer.write(ends)
        self._local_sessions.clear()
        await trio.to_thread.run_sync(self._save_local_sessions)

    async def run(self, *, ready=None, progress=None, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve until SIGTERM/SIGINT or `request_shutdown`. ``ready()``: once it listens;
        ``progress``: told how far a start-up rebuild is (`projection.Progress`)."""
        self._progress = progress
        self._take_lock()
        try:
            self._write_pid()
            self.registry = Registry(Limits.from_config(self.config.values, raise_descriptor_limit()))
            tune_allocator()
            bound_object_cache()
            await trio.to_thread.run_sync(self._open_store)
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                await nursery.start(self.writer.run_writer)
                await nursery.start(self.writer.view.run)
                await nursery.start(self.presence.run)
                await self.writer.after_facts()  # a team root adopted or changed while stopped
                await self._end_orphaned_sessions()
                await self._start_extensions(nursery)
                await nursery.start(unix.serve_unix, self, self.paths.socket)
                self._listening()
                await nursery.start(self._watch_signals)  # installed before we announce readiness
                nursery.start_soon(watch_checkout, self.paths.main_repo, self._checkout_gone)
                log.info("thrum daemon %s ready (pid %d, socket %s)", __version__, os.getpid(), self.paths.socket)
                if ready is not None:
                    ready()
                task_status.started(self)
                await self._shutdown.wait()
                log.info("shutting down")
                await self._stop_extensions()
                if not self.checkout_gone:  # else the log and the database went with the checkout
                    await self.writer.flush_pending()
                    await self._end_local_sessions()
                    await self.presence.flush()
                nursery.cancel_scope.cancel()
        finally:
            if self.writer is not None:
                try:
                    self.writer.db.close()
                except Exception:
                    pass
            try:
                os.unlink(self.paths.socket)
            except OSError:
                pass
            self._cleanup_files()
            log.info("stopped")

    async def _start_extensions(self, nursery: trio.Nursery) -> None:
        """WebSocket server, subscriptions hub and sync loop, when their modules exist."""
        from . import extensions

        await extensions.start(self, nursery)

    async def _stop_extensions(self) -> None:
        from . import extensions

        await extensions.stop(self)

    def _checkout_gone(self) -> None:
        log.warning("the checkout %s is gone; stopping", self.paths.main_repo)
        self.checkout_gone = True
        self.request_shutdown()

    async def _watch_signals(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            task_status.started()
            async for _ in signals:
                self.request_shutdown()
                return


def setup_logging(paths: ThrumPaths, *, foreground: bool) -> None:
    paths.var.mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = [logging.FileHandler(paths.log_file)]
    if foreground:
        handlers.append(logging.StreamHandler())
    logging.basicConfig(
        level=os.environ.get("THRUM_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )


def main(paths: ThrumPaths, *, ready_fd: int | None = None, foreground: bool = False) -> int:
    from ..ownership import UntrustedState, require_own_state

    try:  # before anything is read from (or logged into) .thrum/
        require_own_state(paths)
    except UntrustedState as exc:
        tell_starter(ready_fd, {"error": exc.message})
        print(f"thrum: {exc.message}", file=sys.stderr, flush=True)
        return 1
    setup_logging(paths, foreground=foreground)

    try:
        daemon = Daemon(paths)  # reads the config: a bad one is reported like any start-up error
        trio.run(
            lambda: daemon.run(
                ready=lambda: tell_starter(ready_fd, {"pid": os.getpid()}, close=True),
                progress=RebuildReports(ready_fd),
            )
        )
    except AlreadyRunning as exc:
        log.info("%s", exc.message)
        tell_starter(ready_fd, {"error": exc.message, "already_running": True})
        if ready_fd is None:
            print(f"thrum: {exc.message}", flush=True)
        return 3
    except errors.ThrumError as exc:
        log.error("%s", exc.message)
        tell_starter(ready_fd, {"error": exc.message})
        return 1
    except Exception as exc:
        log.exception("daemon crashed")
        tell_starter(ready_fd, {"error": f"daemon failed: {exc}"})
        return 1
    return 0

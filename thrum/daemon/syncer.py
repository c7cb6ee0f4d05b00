"""The daemon's sync loop: commit, fetch, merge, fold, push (DESIGN §6).

When it runs: shortly after local writes that create something (debounced;
receipts and edits ride along with the next sync and never cause a commit of
their own), on a timer when a remote is configured (default 30 s), and on
``sync.run`` (which waits for the result). Local-only mode commits but never
fetches or pushes.

The git work (pygit2) runs in a worker thread. It reaches the log only through
what the writer lends it (`WriterLog`, the `thrum.sync.logaccess.LogAccess` of the
daemon): the writer's lock for the commit and for each merge chunk, never across
network calls, so local sends go on while a slow remote is fetched; each merged
chunk is handed to `Writer.apply_remote`, which puts the files in place and folds
the lines they brought before the lock is let go. What was applied is published to
subscribers like local events once the cycle ends.

A remote that accepts the connection and never answers holds a cycle for the whole
network timeout. Meanwhile ``sync status`` (and ``doctor``) answer at once: they
never wait for the running cycle (what it has not counted yet is reported as
unknown), and say since when it runs and waits on the remote. Shutdown does not
wait for it either: the cycle's thread passes a `gate.CycleGate` whenever it leaves
or re-enters its network operations, so `stop` waits only for local work in
progress (bounded, on disk), then abandons the thread inside the fetch or push it
waits on; the thread can no longer touch the worktree or the database, and the
process exits (what was not committed or pushed is, at the next start, as after
a crash: found and sent by the next sync).

Which login a cycle uses is `thrum.daemon.logins`; what the remote lacks and whether
its tip moved, `thrum.daemon.lookout`; the object stores' tidy-up, `thrum.daemon.tidy`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .. import errors
from ..config import Config
from ..paths import ThrumPaths
from ..store import chain_fold, projection
from ..sync import state as sync_record
from ..sync.gate import Abandoned, CycleGate
from .logins import Logins
from .lookout import Lookout
from .pace import Pace, starts_conversation, write_delay
from .team import TeamState
from .tidy import Tidy
from .writer import Writer
from .writerlog import WriterLog

if TYPE_CHECKING:
    from ..sync.cycle import SyncReport
    from ..sync.gitstore.api import GitStore
    from ..sync.merge.shard import Prefer
    from ..sync.replicate import Replicator
    from ..sync.transport.credentials import Credentials

log = logging.getLogger(__name__)

QUIET_TYPES = frozenset({"message.read", "message.unread", "message.archive", "message.edit"})


def triggers_sync(applied: list[dict[str, Any]]) -> bool:
    """Whether a local write should schedule a sync: receipts and edits ride along with the next one."""
    return any(d["type"] not in QUIET_TYPES for d in applied)


class SyncLoop:
    def __init__(
        self,
        config: Config,
        paths: ThrumPaths,
        worktree: Path,
        writer: Writer,
        team: TeamState,
        prefer: Prefer | None,
        nursery: trio.Nursery,
        git_store: Callable[[Path], GitStore] | None = None,
    ):
        """``writer``: lends the log to each cycle (`WriterLog`) and publishes what it
        brought; ``team``: the committed root, read again around each cycle; ``prefer``:
        which copy of a line rewritten in place to keep (the trust layer's);
        ``nursery``: where an on-demand cycle runs (`refresh`); ``git_store``: opens the
        git store of the worktree, once for the replicator and once for the remote's view
        (None: the repository's, through libgit2; tests of the daemon's cycles give the
        in-memory fake, `thrum.sync.gitstore.memory`)."""
        self.cfg = config
        self._paths = paths
        self._worktree = worktree
        self._writer = writer
        self._team = team
        self._prefer = prefer
        self._nursery = nursery
        self._git_store = git_store
        self._logins = Logins(config)
        self._kick = trio.Event()
        self._tidy = Tidy(config.remote, lambda: self.replicator, lambda: self.mode() == "remote")
        self._write_kick = False
        self._cycle_lock = trio.Lock()
        self._stopped = False
        self.cycles = 0
        self.replicator: Replicator | None = None
        self.lookout = Lookout(writer)  # what the remote lacks, and whether its tip moved
        self._scanned = False  # has a cycle asked git which files changed since the daemon started?
        self.gate = CycleGate()  # lets `stop` abandon a cycle's thread while it waits on the network
        self._cycle_scope: trio.CancelScope | None = None  # the running cycle's thread; cancelled by `stop`
        self._cycle_since: float | None = None  # time.time() the running cycle started
        self._refresh_done: trio.Event | None = None  # the on-demand cycle in flight
        self.pace = Pace(
            float(self.cfg.sync_interval), float(self.cfg.sync_active_interval), float(self.cfg.sync_active_window)
        )
        self._last_failed = False
        self._last_cycle_began = -float("inf")  # trio.current_time() of the last cycle's start

    # ------------------------------------------------------------------ setup
    def _make_replicator(self) -> Replicator:
        from ..sync.remoteview import RemoteView
        from ..sync.replicate import Replicator

        replicator = Replicator(
            self._worktree,
            self.cfg.remote,
            self._logins.for_cycle(),
            prefer=self._prefer,
            max_intake_bytes=int(self.cfg.max_sync_intake_bytes),
            store=self._open_git_store(),
            network=self._network,
        )
        self.lookout.watch(RemoteView(self._worktree, self.cfg.remote, store=self._open_git_store()))
        return replicator

    def _open_git_store(self) -> GitStore | None:
        return self._git_store(self._worktree) if self._git_store is not None else None

    def _network(self, what: str) -> AbstractContextManager[None]:
        """Each fetch, push or tip check over the network: counted, then through the gate."""
        self.pace.requested()
        return self.gate.network(what)

    def mode(self) -> str:
        return sync_record.sync_mode(self.cfg, bool(self.replicator and self.replicator.has_remote()))

    def remote_url(self) -> str | None:
        """The remote's URL as the replicator sees it (None before the first cycle)."""
        return self.replicator.remote_url() if self.replicator is not None else None

    def on_write(self, applied: list[dict[str, Any]]) -> None:
        """Writer callback: something durable happened; sync soon unless it was only receipts/edits."""
        if triggers_sync(applied):
            if starts_conversation(applied):
                self.pace.activity()
            self._write_kick = True
            self._kick.set()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.replicator = await trio.to_thread.run_sync(self._make_replicator)
        self._writer.subscribe(self._subscriber)
        await trio.to_thread.run_sync(self._count_pending)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._tidy.run)
            task_status.started()
            await self._sync_loop()
            nursery.cancel_scope.cancel()

    async def _sync_loop(self) -> None:
        """Cycles after local writes; otherwise looks at the remote's tip at the pace
        `Pace` sets and runs a cycle only when there is something to do (`thrum.daemon.pace`)."""
        while not self._stopped:
            timeout = self.pace.next_gap() if self.mode() == "remote" else float("inf")
            kicked = False
            with trio.move_on_after(timeout):
                await self._kick.wait()
                kicked = True
            self._kick = trio.Event()
            if self._stopped:
                break
            if self._write_kick:
                self._write_kick = False
                await trio.sleep(
                    write_delay(float(self.cfg.sync_debounce), trio.current_time() - self._last_cycle_began)
                )
                if not self._last_failed and self.pending_events() == 0:
                    continue  # a cycle since (`sync.run`, or the one before in a burst) took the writes
            elif not kicked and not await self._worth_a_cycle():
                continue
            try:
                await self.sync_now()
            except errors.ThrumError as exc:
                if not self._stopped:
                    log.warning("sync failed: %s", exc.message)
            except Exception:
                log.exception("sync failed")

    async def _worth_a_cycle(self) -> bool:
        """Whether a timer's look finds work: the remote's tip moved, something here waits
        to be pushed, or the last cycle failed (then it is retried at this pace)."""
        if self._last_failed or self.pending_events() > 0:
            return True
        replicator = self.replicator
        if replicator is None:
            return False
        try:
            async with self._cycle_lock:  # one worker at a time behind the gate
                with trio.CancelScope(shield=True) as scope:
                    self._cycle_scope = scope
                    try:
                        moved = await trio.to_thread.run_sync(
                            self.lookout.moved, replicator, self.gate, self._logins.for_looks(), abandon_on_cancel=True
                        )
                    finally:
                        self._cycle_scope = None
        except Abandoned:
            return False
        except errors.ThrumError as exc:
            log.info("could not look at the remote's tip (%s); a full cycle says why", exc.message)
            return True
        if scope.cancelled_caught:
            return False
        self.lookout.looked()
        return moved

    async def _subscriber(self, applied: list[dict[str, Any]], source: str) -> None:
        if source == "local":
            self.on_write(applied)

    async def stop(self) -> None:
        """No more cycles; a running one is abandoned once it only waits on the network.

        Waits while its thread does local work (reading, merging, committing, folding):
        that is bounded and must not be cut; a fetch or push is not waited for.
        """
        self._stopped = True
        self._kick.set()
        await trio.to_thread.run_sync(self.gate.close)
        if self._cycle_scope is not None:
            self._cycle_scope.cancel()
        replicator = self.replicator
        if replicator is not None:  # unless a cycle still holds it (its stat data is only a speed-up)
            await trio.to_thread.run_sync(lambda: replicator.index.flush(wait=False))

    # ------------------------------------------------------------------ on demand
    async def refresh(self, wait: float) -> bool:
        """Fetch and merge once now (a full cycle) for a caller that met an unknown
        address; wait at most ``wait`` seconds for it (the cycle goes on after that).

        Concurrent callers share one cycle; a caller that comes after a cycle ended gets
        its own (a cycle that ended a moment ago may have missed what it looks for: a
        registration's own fetch just before a send, issue 30). Returns whether a cycle
        ended in time (failures are recorded in ``sync status`` like any other cycle's).
        """
        if self.mode() != "remote":
            return False
        if self._refresh_done is None:
            self._refresh_done = trio.Event()
            self._nursery.start_soon(self._refresh_cycle, self._refresh_done)
        done = self._refresh_done
        with trio.move_on_after(wait):
            await done.wait()
            return True
        return False

    async def _refresh_cycle(self, done: trio.Event) -> None:
        try:
            await self.sync_now()
        except errors.ThrumError as exc:
            if not self._stopped:
                log.warning("sync for an unknown address failed: %s", exc.message)
        except Exception:
            log.exception("sync for an unknown address failed")
        finally:
            self._refresh_done = None
            done.set()

    # ------------------------------------------------------------------ one cycle
    async def sync_now(self, env: dict[str, str] | None = None) -> dict[str, Any]:
        """Run one full cycle (waiting for a running one first) and return its report.

        ``env``: the login variables the asking `thrum sync` passed along; they serve
        this cycle only (nothing a client gives outlives its request).

        Raises:
            SyncFailed: the cycle failed; ``sync status`` records why. Also when the
                daemon stops meanwhile (the cycle is abandoned, not recorded).
        """
        async with self._cycle_lock:
            self._last_cycle_began = trio.current_time()
            login = self._logins.for_cycle(env)
            mode = self.mode()
            applied: list[dict[str, Any]] = []
            files = WriterLog(self._writer, applied, scanned=self._scanned)
            written_before = self._writer.events_written
            refused_before = sum((await self._writer.read(projection.fold_counts)).values())
            report = None
            try:
                # Shielded: a caller that goes away never cuts a cycle; only `stop` cancels this
                # scope, once the gate says the thread only waits on the network.
                with trio.CancelScope(shield=True) as scope:
                    self._cycle_scope, self._cycle_since = scope, time.time()
                    try:
                        report = await trio.to_thread.run_sync(
                            self._cycle_in_thread, mode, files, login, abandon_on_cancel=True
                        )
                    except Abandoned:
                        pass
                    except errors.ThrumError as exc:
                        self._last_failed = True
                        await trio.to_thread.run_sync(sync_record.record, self._paths, None, exc.message)
                        raise
                    finally:
                        self._cycle_scope = self._cycle_since = None
            finally:
                self._logins.cycle_ended(login, env)
            if scope.cancelled_caught:
                log.warning("sync abandoned while it waited for the remote: the daemon is stopping")
            if report is None:
                raise errors.SyncFailed(
                    "the daemon stopped before the sync finished; nothing is lost: "
                    "the next sync sends what this one did not"
                )
            self.cycles += 1
            self._last_failed = report.error is not None
            self._tidy.request()
            if applied:
                if starts_conversation(applied):
                    self.pace.activity()
                await self._writer.publish(applied, "sync")
            await self._team_facts()
            taken_at = files.taken_at if files.taken_at is not None else written_before
            if not self.lookout.cycle_ended(report.error is None, report.pushed, mode == "remote", taken_at):
                # after the publish: counting asks git for the worktree's status, off the delivery path
                await trio.to_thread.run_sync(self._count_pending)
            # a line the fold refused (quarantined) was not received; the chains' report: for a stopped `sync status`
            counts, chains = await self._writer.read(lambda db: (projection.fold_counts(db), chain_fold.report(db)))
            refused = sum(counts.values()) - refused_before
            report.received = max(0, report.received - max(0, refused))
            result = {**sync_record.report_dict(report, mode), "quarantined": max(0, refused)}
            await trio.to_thread.run_sync(sync_record.record, self._paths, {**result, "chains": chains}, report.error)
            if report.error:
                raise errors.SyncFailed(report.error)
            return result

    async def _root_now(self) -> None:
        """Read the committed root now; a change is judged in the background (the caller
        answers at once)."""
        if await trio.to_thread.run_sync(self._team.read):
            self._writer.ask_rejudge("the team root changed")
            self._nursery.start_soon(self._writer.after_facts)

    async def _team_facts(self) -> None:
        """The team root as committed now (a pull may have brought a new one), and what the
        facts this cycle brought ask for (`Writer.after_facts`), before the cycle answers."""
        if await trio.to_thread.run_sync(self._team.read):
            self._writer.ask_rejudge("the team root changed")
        await self._writer.after_facts()

    def _cycle_in_thread(self, mode: str, files: WriterLog, login: Credentials) -> SyncReport:
        from ..sync.cycle import run_cycle

        self._team.refresh_binding()  # the root as committed now (a pull may have brought one)
        with self.gate.held():  # local work; `stop` abandons the thread only in network sections
            replicator = self.replicator
            if replicator is None or not replicator.healthy():
                with files.locked():
                    replicator = self._recreate_worktree()
            report = run_cycle(replicator, files, remote=mode == "remote", sleep=self.gate.sleep, credentials=login)
            self._scanned = True
            return report

    def _count_pending(self) -> None:
        """Count from the log what the remote lacks (in a worker thread; `Lookout.count`)."""
        self.lookout.count(WriterLog(self._writer, [], scanned=True), self.mode() == "remote")

    def pending_events(self) -> int:
        """Events the remote lacks: the last count from the log, plus what was written since."""
        return self.lookout.pending(self.mode() == "remote")

    def _recreate_worktree(self) -> Replicator:
        """The worktree vanished under the daemon: make it again (its files recovered) and
        a replicator for it. Called with the writer lock held."""
        from ..sync.worktree import ensure_sync_worktree

        log.warning("the sync worktree %s vanished; recreating it", self._worktree)
        ensure_sync_worktree(self._paths.main_repo, self.cfg.remote, callbacks=self._logins.callbacks())
        self._writer.log_files_recreated()
        replicator = self._make_replicator()
        self.replicator = replicator
        self._scanned = False
        return replicator

    # ------------------------------------------------------------------ status
    def waiting_on_remote(self) -> float | None:
        """Seconds the running cycle has waited in its current fetch or push (None: it does not)."""
        since = self.gate.network_since
        return None if since is None or self._cycle_since is None else max(0.0, time.time() - since)

    async def still_waiting_on_remote(self, grace: float) -> float | None:
        """Seconds the running cycle has waited on the remote when its fetch or push has
        not ended ``grace`` seconds from now (None: it did, or none was running)."""
        if self.waiting_on_remote() is None:
            return None
        if await trio.to_thread.run_sync(self.gate.wait_off_network, grace, abandon_on_cancel=True):
            return None
        return self.waiting_on_remote()

    async def status(self) -> dict[str, Any]:
        """Never waits for a running cycle: what only it could tell is None (unknown) meanwhile."""
        state = await trio.to_thread.run_sync(sync_record.load_state, self._paths)
        quarantined = await self._writer.read(projection.fold_counts)
        chains = await self._writer.read(chain_fold.report)
        chains["rollbacks"] = state.get("rollbacks") or []
        url = self.remote_url()
        ignored = (
            await trio.to_thread.run_sync(self.replicator.ignored_paths, False) if self.replicator is not None else {}
        )
        waiting = self.gate.network_since if self._cycle_since is not None else None
        await self._root_now()
        return {
            "mode": self.mode(),
            "remote": self.cfg.remote if self.mode() == "remote" else None,
            "remote_url": url,
            "interval_s": self.cfg.sync_interval,
            "pace": self.pace.status(self.lookout.tip_checks),
            "last_success": state.get("last_success"),
            "last_error": state.get("last_error"),
            "last_error_at": state.get("last_error_at"),
            "last_attempt": state.get("last_attempt"),
            "last_report": state.get("last_report"),
            "pending_events": self.pending_events(),
            "quarantined": sum(quarantined.values()),
            "quarantined_by_kind": quarantined,
            "chains": chains,
            "ignored_paths": sum(ignored.values()) if ignored is not None else None,
            "ignored_paths_by_reason": ignored,
            "cycles": self.cycles,
            "syncing_since": _utc(self._cycle_since),
            "waiting_for_remote_since": _utc(waiting),
            "credential_source": self._logins.last_used,
            "team": self._team.status(),
        }


def _utc(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

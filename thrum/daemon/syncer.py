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

Credentials: each ``thrum sync`` may pass along login variables of its environment
(`thrum.config.FORWARDED_ENV`, only from the local user's CLI: `thrum.daemon.peer`);
they serve that one cycle and are never kept. The automatic cycles log in with the
daemon's own environment and config (docs/design/remotes.md).
"""

from __future__ import annotations

import logging
import time
from functools import partial
from contextlib import AbstractContextManager
from datetime import datetime, timezone

import trio

from .. import errors
from ..store import chain_fold, projection
from ..sync import state as sync_record
from ..sync.gate import Abandoned, CycleGate
from ..sync.teamfile import team_summary
from .pace import Pace
from .writerlog import WriterLog

log = logging.getLogger(__name__)

QUIET_TYPES = frozenset({"message.read", "message.unread", "message.archive", "message.edit"})


def triggers_sync(applied: list[dict]) -> bool:
    """Whether a local write should schedule a sync: receipts and edits ride along with the next one."""
    return any(d["type"] not in QUIET_TYPES for d in applied)


CONVERSATION_TYPES = frozenset({"message.create"})


def starts_conversation(applied: list[dict]) -> bool:
    """Whether events make the replica look often (`thrum.daemon.pace`): a message, sent or
    received. Housekeeping (a session that ends, receipts, registrations) is synced all
    the same, but does not buy two minutes of looks every second."""
    return any(d.get("type") in CONVERSATION_TYPES for d in applied)


class SyncLoop:
    def __init__(self, daemon):
        self.daemon = daemon
        self.cfg = daemon.config
        self._kick = trio.Event()
        self._tidy = trio.Event()
        self._write_kick = False
        self._cycle_lock = trio.Lock()
        self._stopped = False
        self.cycles = 0
        self.pushed_events_mark = 0
        self.replicator = None
        self.view = None  # sync.remoteview.RemoteView: the remote's tip and what it lacks, between cycles
        self._scanned = False  # has a cycle asked git which files changed since the daemon started?
        self.prefer = None  # merge.Prefer: which copy of a line rewritten in place to keep (the trust layer's)
        self.gate = CycleGate()  # lets `stop` abandon a cycle's thread while it waits on the network
        self._cycle_scope: trio.CancelScope | None = None  # the running cycle's thread; cancelled by `stop`
        self._cycle_since: float | None = None  # time.time() the running cycle started
        self._refresh_done: trio.Event | None = None  # the on-demand cycle in flight
        # Events the remote's tip lacked, counted from the log (not from memory: issue 30,
        # item 6) at start-up and after each cycle, with the writer's count at that time.
        self._pending_base: tuple[int, int] | None = None
        self.pace = Pace(
            float(self.cfg.sync_interval), float(self.cfg.sync_active_interval), float(self.cfg.sync_active_window)
        )
        self.tip_checks = 0
        self._last_failed = False

    # ------------------------------------------------------------------ setup
    def _make_replicator(self):
        from ..sync.remoteview import RemoteView
        from ..sync.replicate import Replicator
        from ..sync.transport.credentials import credentials_from_env
        from ..trust.resolve import prefer_verified

        if self.prefer is None and getattr(self.daemon, "ring", None) is not None:
            self.prefer = prefer_verified(self.daemon.ring)
        replicator = Replicator(
            self.daemon.worktree,
            self.cfg.remote,
            credentials_from_env(self.cfg.values),
            prefer=self.prefer,
            max_intake_bytes=int(self.cfg.max_sync_intake_bytes),
        )
        replicator.network = self._network
        self.view = RemoteView(self.daemon.worktree, self.cfg.remote)
        return replicator

    def _network(self, what: str) -> AbstractContextManager:
        """Each fetch, push or tip check over the network: counted, then through the gate."""
        self.pace.requested()
        return self.gate.network(what)

    def _credentials(self, env: dict[str, str] | None = None):
        """Logins are looked up per cycle: the config, the daemon's environment, and what
        the `thrum sync` that asked for this cycle passed along (never kept for another)."""
        from ..sync.transport.credentials import credentials_from_env

        return credentials_from_env(self.cfg.values, forwarded=env, own="the daemon's environment")

    def _forget_passed_login(self) -> None:
        """The login a caller passed along ends with its cycle; ``sync status`` still says
        which login the last cycle used."""
        if self.replicator is not None:
            used = self.replicator.credentials
            self.replicator.credentials = self._credentials()
            self.replicator.credentials.last_source = getattr(used, "last_source", None)

    def mode(self) -> str:
        return sync_record.sync_mode(self.cfg, bool(self.replicator and self.replicator.has_remote()))

    def on_write(self, applied: list[dict]) -> None:
        """Writer callback: something durable happened; sync soon unless it was only receipts/edits."""
        if triggers_sync(applied):
            if starts_conversation(applied):
                self.pace.activity()
            self._write_kick = True
            self._kick.set()

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.replicator = await trio.to_thread.run_sync(self._make_replicator)
        self.daemon.writer.subscribers.append(self._subscriber)
        await trio.to_thread.run_sync(self._count_pending, WriterLog(self.daemon.writer, [], scanned=True))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._tidy_loop)
            task_status.started()
            await self._sync_loop()
            nursery.cancel_scope.cancel()

    async def _tidy_loop(self) -> None:
        """Keep the object stores compact after syncs, beside them (`thrum.sync.maintenance`:
        git's geometric repack in a child process, which takes neither the writer lock nor
        the replicator's and is killed when the daemon stops)."""
        from ..sync import SyncError, maintenance

        tidier = None
        while True:
            await self._tidy.wait()
            self._tidy = trio.Event()
            replicator = self.replicator
            if tidier is None or tidier.own != replicator.common_dir:
                tidier = maintenance.Tidier(replicator.common_dir, replicator.common_dir / "thrum-sync" / "repack.git")
            remote = replicator.path_remote() if self.mode() == "remote" else None
            trusted = replicator.credentials.trusted_paths if replicator.credentials is not None else ()
            try:
                due = partial(tidier.due_repacks, remote, where=f"remote {self.cfg.remote} ({remote})", trusted=trusted)
                repacks = await trio.to_thread.run_sync(due)
            except SyncError as exc:  # the sync reports the same refusal
                log.info("not consolidating the remote: %s", exc.message)
                continue
            except Exception:  # noqa: BLE001 - a failed tidy-up never stops syncing
                log.exception("could not prepare the consolidation of %s", replicator.common_dir)
                continue
            for repack in repacks:
                done = None
                try:
                    with trio.move_on_after(maintenance.TIMEOUT_S):  # the child is killed when it runs over
                        done = await trio.run_process(
                            repack.argv, env=repack.env, capture_stdout=True, capture_stderr=True, check=False
                        )
                except OSError as exc:  # a failed tidy-up never stops syncing
                    tidier.failed(repack, str(exc))
                    continue
                if done is None:
                    tidier.failed(repack, f"took longer than {maintenance.TIMEOUT_S:.0f}s")
                else:
                    tidier.finished(repack, done.returncode, done.stderr)

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
                await trio.sleep(float(self.cfg.sync_debounce))  # debounce: let a burst of writes batch up
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
        try:
            async with self._cycle_lock:  # one worker at a time behind the gate
                with trio.CancelScope(shield=True) as scope:
                    self._cycle_scope = scope
                    try:
                        tip, known = await trio.to_thread.run_sync(self._look, self.replicator, abandon_on_cancel=True)
                    finally:
                        self._cycle_scope = None
        except Abandoned:
            return False
        except errors.ThrumError as exc:
            log.info("could not look at the remote's tip (%s); a full cycle says why", exc.message)
            return True
        if scope.cancelled_caught:
            return False
        self.tip_checks += 1
        return tip != known

    def _look(self, replicator):
        with self.gate.held():
            return self.view.tip(replicator.credentials, replicator.network), self.view.known_tip()

    async def _subscriber(self, applied: list[dict], source: str) -> None:
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
        if self.mode() != "remote" or self.daemon.nursery is None:
            return False
        if self._refresh_done is None:
            self._refresh_done = trio.Event()
            self.daemon.nursery.start_soon(self._refresh_cycle, self._refresh_done)
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
    async def sync_now(self, env: dict[str, str] | None = None) -> dict:
        """Run one full cycle (waiting for a running one first) and return its report.

        ``env``: the login variables the asking `thrum sync` passed along; they serve
        this cycle only (nothing a client gives outlives its request).

        Raises:
            SyncFailed: the cycle failed; ``sync status`` records why. Also when the
                daemon stops meanwhile (the cycle is abandoned, not recorded).
        """
        async with self._cycle_lock:
            if self.replicator is not None:
                self.replicator.credentials = self._credentials(env)
            mode = self.mode()
            applied: list[dict] = []
            written_before = self.daemon.writer.events_written
            refused_before = sum((await self.daemon.writer.read(projection.fold_counts)).values())
            report = None
            try:
                # Shielded: a caller that goes away never cuts a cycle; only `stop` cancels this
                # scope, once the gate says the thread only waits on the network.
                with trio.CancelScope(shield=True) as scope:
                    self._cycle_scope, self._cycle_since = scope, time.time()
                    try:
                        report = await trio.to_thread.run_sync(
                            self._cycle_in_thread, mode, applied, abandon_on_cancel=True
                        )
                    except Abandoned:
                        pass
                    except errors.ThrumError as exc:
                        self._last_failed = True
                        await trio.to_thread.run_sync(sync_record.record, self.daemon.paths, None, exc.message)
                        raise
                    finally:
                        self._cycle_scope = self._cycle_since = None
            finally:
                if env:
                    self._forget_passed_login()
            if scope.cancelled_caught:
                log.warning("sync abandoned while it waited for the remote: the daemon is stopping")
            if report is None:
                raise errors.SyncFailed(
                    "the daemon stopped before the sync finished; nothing is lost: "
                    "the next sync sends what this one did not"
                )
            self.cycles += 1
            self._last_failed = report.error is not None
            self._tidy.set()
            if applied:
                if starts_conversation(applied):
                    self.pace.activity()
                await self.daemon.writer.publish(applied, "sync")
            await self._team_facts()
            # after the publish: counting asks git for the worktree's status, off the delivery path
            await trio.to_thread.run_sync(self._count_pending, WriterLog(self.daemon.writer, [], scanned=True))
            # a line the fold refused (quarantined) was not received, whatever the merge brought
            refused = sum((await self.daemon.writer.read(projection.fold_counts)).values()) - refused_before
            report.received = max(0, report.received - max(0, refused))
            result = {**sync_record.report_dict(report, mode), "quarantined": max(0, refused)}
            if report.error is None and (report.pushed or mode != "remote"):
                self.pushed_events_mark = written_before
            chains = await self.daemon.writer.read(chain_fold.report)  # kept for `sync status` while stopped
            await trio.to_thread.run_sync(
                sync_record.record, self.daemon.paths, {**result, "chains": chains}, report.error
            )
            if report.error:
                raise errors.SyncFailed(report.error)
            return result

    async def _root_now(self) -> None:
        """Read the committed root now; a change is judged in the background (the caller
        answers at once)."""
        fold = self.daemon.writer.fold_lines
        if fold is not None and await trio.to_thread.run_sync(self.daemon.team.read):
            fold.ask_rejudge("the team root changed")
            nursery = getattr(self.daemon, "nursery", None)
            if nursery is not None:
                nursery.start_soon(self.daemon.writer.after_facts)

    async def _team_facts(self) -> None:
        """The team root as committed now (a pull may have brought a new one), and what the
        facts this cycle brought ask for (`Writer.after_facts`), before the cycle answers."""
        team = getattr(self.daemon, "team", None)
        fold = self.daemon.writer.fold_lines
        if team is not None and fold is not None and await trio.to_thread.run_sync(team.read):
            fold.ask_rejudge("the team root changed")
        await self.daemon.writer.after_facts()

    def _cycle_in_thread(self, mode: str, applied: list[dict]):
        from ..sync.cycle import run_cycle

        self.daemon.log_binding.refresh()  # the root as committed now (a pull may have brought one)
        files = WriterLog(self.daemon.writer, applied, scanned=self._scanned)
        with self.gate.held():  # local work; `stop` abandons the thread only in network sections
            if not self.replicator.healthy():
                with files.locked():
                    self._recreate_worktree()
            report = run_cycle(self.replicator, files, remote=mode == "remote", sleep=self.gate.sleep)
            self._scanned = True
            return report

    def _count_pending(self, files: "WriterLog") -> None:
        """Count from the log what the remote lacks (in a worker thread; see ``_pending_base``)."""
        if self.mode() != "remote":
            return
        written = self.daemon.writer.events_written
        try:
            count = self.view.pending(files)
        except Exception:  # noqa: BLE001 - a count is for reports; the next cycle counts again
            log.exception("could not count the events the remote lacks")
            return
        self._pending_base = (count, written)

    def pending_events(self) -> int:
        """Events the remote lacks: the last count from the log, plus what was written since."""
        written = self.daemon.writer.events_written
        if self.mode() == "remote" and self._pending_base is not None:
            count, at = self._pending_base
            return count + max(0, written - at)
        return max(0, written - self.pushed_events_mark)

    def _recreate_worktree(self) -> None:
        """The worktree vanished under the daemon: make it again (its files recovered) and
        a replicator for it. Called with the writer lock held."""
        from ..sync.worktree import ensure_sync_worktree

        log.warning("the sync worktree %s vanished; recreating it", self.daemon.worktree)
        ensure_sync_worktree(self.daemon.paths.main_repo, self.cfg.remote, callbacks=self._callbacks())
        self.daemon.writer.log_files_recreated()
        self.replicator = self._make_replicator()
        self.replicator.credentials = self._credentials()
        self._scanned = False

    def _callbacks(self):
        from ..sync.transport.credentials import remote_callbacks

        if self.cfg.local_only:
            return None
        return remote_callbacks(self._credentials())

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

    async def status(self) -> dict:
        """Never waits for a running cycle: what only it could tell is None (unknown) meanwhile."""
        state = await trio.to_thread.run_sync(sync_record.load_state, self.daemon.paths)
        quarantined = await self.daemon.writer.read(projection.fold_counts)
        chains = await self.daemon.writer.read(chain_fold.report)
        chains["rollbacks"] = state.get("rollbacks") or []
        url = self.replicator.remote_url() if self.replicator is not None else None
        ignored = (
            await trio.to_thread.run_sync(self.replicator.ignored_paths, False) if self.replicator is not None else {}
        )
        waiting = self.gate.network_since if self._cycle_since is not None else None
        if getattr(self.daemon, "team", None) is not None:
            await self._root_now()
            team = self.daemon.team.status()
        else:
            team = await trio.to_thread.run_sync(team_summary, self.daemon.paths.main_repo, self.cfg.remote)
        return {
            "mode": self.mode(),
            "remote": self.cfg.remote if self.mode() == "remote" else None,
            "remote_url": url,
            "interval_s": self.cfg.sync_interval,
            "pace": {
                "state": self.pace.state(),
                "active_interval_s": self.pace.active_s,
                "active_window_s": self.pace.window_s,
                "tip_checks": self.tip_checks,
                "requests_last_hour": self.pace.requests_last_hour(),
            },
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
            "credential_source": getattr(getattr(self.replicator, "credentials", None), "last_source", None),
            "team": team,
        }


def _utc(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

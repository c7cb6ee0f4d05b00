"""Object stores kept compact beside the syncs (`thrum.sync.maintenance`).

After each cycle the sync loop asks for a tidy-up (`Tidy.request`); this task then
runs git's geometric repack of the local store (and of a path remote's, from a
private git directory) in a child process. It takes neither the writer's lock nor the
replicator's, only the store's own (`sync.packdir.lock_store`: a store another process
is repacking, a path remote shared with another replica, is skipped this time). The
child runs in its own process group, and the group is ended when it runs over
`maintenance.TIMEOUT_S` or the daemon stops (git repack's pack-objects child with it).
A full repack of a large store runs for minutes, and every sync meanwhile adds a pack
it cannot roll up: right after one, the stores are looked at again.
A failed tidy-up never stops syncing (it is logged, and `thrum doctor` says so).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from ..sync import maintenance
    from ..sync.replicate import Replicator

log = logging.getLogger(__name__)


class Tidy:
    def __init__(self, remote: str, replicator: Callable[[], Replicator | None], remote_mode: Callable[[], bool]):
        """``remote``: the remote's name (for messages); ``replicator``: the sync loop's
        current one (it is made again when the worktree vanishes); ``remote_mode``: whether
        the loop syncs with a remote now (a path remote's store is tidied too)."""
        self._remote = remote
        self._replicator = replicator
        self._remote_mode = remote_mode
        self._asked = trio.Event()

    def request(self) -> None:
        self._asked.set()

    async def run(self) -> None:
        from ..sync import SyncError, maintenance, packdir

        tidier = None
        while True:
            await self._asked.wait()
            self._asked = trio.Event()
            replicator = self._replicator()
            if replicator is None:
                continue
            try:
                own = replicator.common_dir
            except SyncError:  # a store that is not a repository on disk (a test's fake): nothing to pack
                continue
            if tidier is None or tidier.own != own:
                tidier = maintenance.Tidier(own, own / "thrum-sync" / "repack.git")
            remote = replicator.path_remote() if self._remote_mode() else None
            trusted = replicator.credentials.trusted_paths if replicator.credentials is not None else ()
            try:
                due = partial(tidier.due_repacks, remote, where=f"remote {self._remote} ({remote})", trusted=trusted)
                repacks = await trio.to_thread.run_sync(due)
            except SyncError as exc:  # the sync reports the same refusal
                log.info("not consolidating the remote: %s", exc.message)
                continue
            except Exception:  # noqa: BLE001 - a failed tidy-up never stops syncing
                log.exception("could not prepare the consolidation of %s", replicator.common_dir)
                continue
            for repack in repacks:
                lock = await trio.to_thread.run_sync(packdir.lock_store, repack.objects)
                if lock is None:
                    log.info("not repacking %s: another process is", repack.objects)
                    continue
                try:
                    repack = await trio.to_thread.run_sync(tidier.recheck, repack)
                    await self._repack(tidier, repack, lock)
                finally:
                    os.close(lock)
                if repack.full:  # the syncs' packs that piled up meanwhile are rolled up now, not after the next sync
                    self.request()

    @staticmethod
    async def _repack(tidier: maintenance.Tidier, repack: maintenance.Repack, lock: int) -> None:
        """Run one repack, its child holding the store's lock too (it outlives us if we are killed)."""
        from ..sync import maintenance

        done = None
        clock = maintenance.ChildClock()
        try:
            with trio.move_on_after(maintenance.TIMEOUT_S):  # the group is ended when it runs over
                for argv in repack.steps:  # a full repack is two (`maintenance`, rule 4)
                    done = None  # a step cut short by the timeout: not the step before's outcome
                    done = await trio.run_process(
                        argv,
                        env=repack.env,
                        capture_stdout=True,
                        capture_stderr=True,
                        check=False,
                        pass_fds=(lock,),
                        process_group=0,  # in our session, below our syncs (`maintenance`, rule 2)
                        deliver_cancel=_end_group,
                    )
                    if done.returncode != 0:
                        break
        except OSError as exc:  # a failed tidy-up never stops syncing
            tidier.failed(repack, str(exc))
            return
        if done is None:
            tidier.failed(repack, f"took longer than {maintenance.TIMEOUT_S:.0f}s")
        else:
            tidier.finished(repack, done.returncode, done.stderr, clock)


async def _end_group(process: trio.Process) -> None:
    """End a repack and its pack-objects child: asked first (git removes its own temporary
    files), killed after a grace period."""
    from ..sync import maintenance

    maintenance.stop_group(process.pid, signal.SIGTERM)
    with trio.move_on_after(5):
        await process.wait()
        return
    maintenance.stop_group(process.pid, signal.SIGKILL)

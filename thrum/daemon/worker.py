"""The writer's own thread: where every batch is appended and folded.

The house rule puts blocking work on `trio.to_thread.run_sync` or on a dedicated
worker; the writer's batches take a dedicated one, for two reasons measured on a
durable send:

1. A hand-off costs about half as much CPU: `trio.to_thread.run_sync` takes a
   limiter token, copies the context and names the thread for every call (~60 µs of
   CPU for a round trip to an empty function under load, against ~30 µs for a queue
   and `run_sync_soon`). With one client, every send is a batch of its own.
2. The batches keep one SQLite connection (peewee keeps one per thread): a commit made
   on another connection makes SQLite drop a connection's whole page cache, which the
   next batch then reads again.

Rules: a job runs to its end whatever happens to the task waiting for it (a
cancellation is delivered when the job is done, as `abandon_on_cancel=False` does);
its exception is raised in the waiting task; the thread runs between `start` and
`stop` (the writer's task), and a job given outside that runs on trio's threads.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, TypeVar

import outcome
import trio

T = TypeVar("T")

_Job = tuple[Callable[..., Any], tuple[Any, ...], trio.lowlevel.Task]


class Worker:
    def __init__(self, name: str):
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (in trio, from the task that will `stop` it)."""
        if self._thread is None:
            token = trio.lowlevel.current_trio_token()
            self._thread = threading.Thread(target=self._serve, args=(self._jobs, token), name=self._name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Let the thread end once the jobs given before are done."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None
            self._jobs = queue.SimpleQueue()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the thread; its result, or its exception raised here."""
        if self._thread is None:
            return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=False)
        self._jobs.put((fn, args, trio.lowlevel.current_task()))
        result: T = await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
        return result

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[_Job | None], token: trio.lowlevel.TrioToken) -> None:
        while (job := jobs.get()) is not None:
            fn, args, task = job
            done = outcome.capture(fn, *args)
            try:
                token.run_sync_soon(trio.lowlevel.reschedule, task, done)
            except trio.RunFinishedError:  # the daemon's loop is gone: nobody waits any more
                return

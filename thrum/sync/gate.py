"""Let the owner of a sync thread abandon it, but only while it waits on the network.

A sync cycle runs in a worker thread. Its network operations (fetch, push, a
credential helper they ask, the backoff between pushes) may block until the network
timeout; its local work (reading and committing the log files, merging them, folding
what arrived) must never be cut in the middle nor overlap whatever runs after the
owner gave up on it. The :class:`CycleGate` tells the two apart.

Rules:

1. The worker holds the gate for its whole cycle (`held`) and lets go of it only
   inside `network` sections, which touch nothing but the object store and the
   remote-tracking ref (what a crash may already interrupt: see tests/faults).
2. `close` takes the gate for good: it waits while the worker does local work, and
   returns once the worker is inside a network section or not in a cycle at all. From
   then on the worker cannot resume local work: leaving its network section, or
   starting a new cycle, raises :class:`Abandoned` (a ``BaseException``, like a
   cancellation, so no ``except Exception`` on the way turns it into a sync error
   and goes on with local work). The owner may then stop waiting for the thread.
3. Without a gate (a `Replicator` made without one: `no_gate`) network sections do nothing.

No trio and no pygit2 here: plain threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

__all__ = ["Abandoned", "CycleGate", "no_gate"]


class Abandoned(BaseException):
    """The gate was closed: the worker must stop at once, without touching local state."""


class CycleGate:
    """See the module rules. One worker at a time; `close` is final."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._owned = False  # the worker holds the gate (only the worker changes it)
        self._network = threading.Condition()  # notified when the worker leaves a network section
        self.network_since: float | None = None  # time.time() the worker entered a network section
        self.network_what: str | None = None  # what it waits for there ("fetch", "push", …)

    @property
    def closed(self) -> bool:
        return self._closed

    def _take(self) -> None:
        self._lock.acquire()
        if self._closed:
            self._lock.release()
            raise Abandoned("the sync was abandoned: the daemon is stopping")
        self._owned = True

    def _let_go(self) -> None:
        self._owned = False
        self._lock.release()

    @contextmanager
    def held(self) -> Iterator[None]:
        """The worker's whole cycle. Raises `Abandoned` when the gate is closed already."""
        self._take()
        try:
            yield
        finally:
            if self._owned:
                self._let_go()

    @contextmanager
    def network(self, what: str = "the remote") -> Iterator[None]:
        """A stretch of the worker's cycle that only waits on the network (see rule 1).

        Raises:
            Abandoned: on the way out, when `close` was called meanwhile.
        """
        if not self._owned:  # not inside `held` (or nested): nothing to let go of
            yield
            return
        with self._network:
            self.network_since, self.network_what = time.time(), what
        self._let_go()
        try:
            yield
        finally:
            with self._network:
                self.network_since = self.network_what = None
                self._network.notify_all()
            self._take()

    def wait_off_network(self, timeout: float) -> bool:
        """Wait at most ``timeout`` s until the worker is in no network section; whether it is."""
        with self._network:
            return self._network.wait_for(lambda: self.network_since is None, timeout)

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` inside a network section (the backoff between pushes)."""
        with self.network("a retry"):
            time.sleep(seconds)

    def close(self) -> None:
        """Wait until the worker does no local work, then close the gate for good (rule 2)."""
        with self._lock:
            self._closed = True


def no_gate(what: str) -> AbstractContextManager[None]:
    """A network section nobody may abandon (`Replicator.network` by default: the offline sync, tests)."""
    return nullcontext()

"""`thrum.sync.gate`: a sync thread may be abandoned only while it waits on the network
(real threads; each step is sequenced with events, nothing is timed)."""

from __future__ import annotations

import threading

import pytest

from thrum.sync.gate import Abandoned, CycleGate


class Worker(threading.Thread):
    """A cycle: local work, a network section that waits for ``answer``, more local work."""

    def __init__(self, gate: CycleGate):
        super().__init__(daemon=True)
        self.gate = gate
        self.in_local = threading.Event()
        self.finish_local = threading.Event()
        self.in_network = threading.Event()
        self.answer = threading.Event()
        self.steps: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.gate.held():
                self.steps.append("local")
                self.in_local.set()
                self.finish_local.wait()
                with self.gate.network("fetch"):
                    self.in_network.set()
                    self.answer.wait()
                self.steps.append("merge")  # local work after the network: must not happen once closed
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            self.error = exc


def test_close_waits_for_local_work_and_abandons_the_network_wait():
    gate = CycleGate()
    w = Worker(gate)
    w.start()
    w.in_local.wait()
    closed = threading.Event()
    closer = threading.Thread(target=lambda: (gate.close(), closed.set()), daemon=True)
    closer.start()
    assert not closed.is_set()  # the worker holds the gate for its local step
    w.finish_local.set()  # the local step ends; the worker enters its network section
    closer.join()  # so close() returns: the worker only waits on the network now
    w.in_network.wait()
    assert closed.is_set() and gate.closed
    assert gate.network_what == "fetch" and gate.network_since is not None
    assert not gate.wait_off_network(0)
    w.answer.set()  # the remote finally answers
    w.join()
    assert isinstance(w.error, Abandoned)
    assert w.steps == ["local"]  # it never went on with local work
    assert gate.network_since is None and gate.wait_off_network(0)


def test_a_cycle_that_ends_before_close_is_not_disturbed_and_none_starts_after():
    gate = CycleGate()
    w = Worker(gate)
    w.finish_local.set()
    w.answer.set()
    w.start()
    w.join()
    assert w.error is None and w.steps == ["local", "merge"]
    gate.close()
    with pytest.raises(Abandoned):
        with gate.held():
            pass


def test_without_held_a_network_section_changes_nothing():
    gate = CycleGate()
    with gate.network("push"):
        assert gate.network_since is None
    gate.close()
    with gate.network("push"):  # not a gated worker (the offline sync): never abandoned
        pass

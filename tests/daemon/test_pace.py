"""The pace of looks at the remote (thrum/daemon/pace.py): fast while active, doubling
back to the configured interval when idle, and the hourly count of requests."""

from __future__ import annotations

from thrum.daemon.pace import Pace


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_activity_looks_often_for_the_window_then_backs_off_to_the_interval():
    clock = Clock()
    pace = Pace(idle_s=30, active_s=1, window_s=120, clock=clock)
    assert pace.state() == "idle" and pace.next_gap() == 30
    pace.activity()
    assert [pace.next_gap() for _ in range(3)] == [1, 1, 1] and pace.state() == "active"
    clock.t += 120
    assert [pace.next_gap() for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert pace.state() == "idle"


def test_no_interval_means_no_looks_and_requests_are_counted_per_hour():
    clock = Clock()
    assert Pace(idle_s=0, active_s=1, window_s=120, clock=clock).next_gap() == float("inf")
    pace = Pace(idle_s=30, active_s=1, window_s=120, clock=clock)
    pace.requested(2)
    clock.t += 1800
    pace.requested()
    assert pace.requests_last_hour() == 3
    clock.t += 1800
    assert pace.requests_last_hour() == 1

"""The wake-up rules, on the daemon's own clock: a real tmux server, a fake host in a pane, a daemon in this trio run.

The daemon runs inside the test's trio run on a MockClock that stands still unless
the test moves it (fixtures/inprocess.py), so "quiet for 3 seconds" is a jump of
the clock, not a wait; everything else is real: tmux (its own -L socket per test),
the fake host reading its pane (fake_host.py), the store. The fake host does not
run thrum here: the test records its pane (what its start hook does) and, when it
answers, surfaces the messages (what its prompt hook does).
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

import pytest
import trio

from fixtures.inprocess import rpc, running_daemon
from tmux_helpers import TMUX, Tmux, wake_lines

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/run installs it)")
DEADLINE = 20.0


async def _until(check, what: str, daemon=None):
    """Poll ``check`` (on the event loop) until truthy, with a real deadline; the daemon runs in between."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        await trio.to_thread.run_sync(time.sleep, 0.01)
    raise AssertionError(
        f"timed out waiting for {what}" + (f" (waker: {daemon.services.waker.panes})" if daemon else "")
    )


class Office:
    """The daemon, its tmux server, and helpers to drive one agent's pane."""

    def __init__(self, daemon, tmux: Tmux, clock):
        self.daemon = daemon
        self.tmux = tmux
        self.clock = clock

    async def host(self, agent: str, *args: str):
        pane, out = await trio.to_thread.run_sync(lambda: self.tmux.host(agent, *args))
        await rpc(self.daemon, "agent.pane", {"caller": agent, "pane": pane, "tmux": self.tmux.env})
        return pane, out

    async def urgent(self, agent: str, text: str = "the build is broken") -> str:
        sent = await rpc(self.daemon, "message.send", {"caller": "alice", "content": text, "to": [f"@{agent}"]})
        return sent["message_id"]

    def result(self, agent: str) -> str | None:
        return (self.daemon.services.waker.status(agent)["last"] or {}).get("result")

    async def decided(self, agent: str, result: str) -> None:
        await _until(lambda: self.result(agent) == result, f"the waker to decide {result!r}", self.daemon)

    async def look_after(self, seconds: float, *, decision: bool = False) -> None:
        """Move the clock on by ``seconds``, then wait for the waker's next look at the panes
        (``decision``: for the next decision of a wake-up that is waiting for the pane)."""
        waker = self.daemon.services.waker
        before = waker.decisions if decision else waker.looks
        self.clock.jump(seconds)
        await _until(lambda: (waker.decisions if decision else waker.looks) > before, "the waker's next look")


@asynccontextmanager
async def office(mock_clock, tmp_path):
    tmux = Tmux(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            daemon = await running_daemon(tmp_path, nursery, agents=(("alice", "lead"), ("bob", "dev")))
            yield Office(daemon, tmux, mock_clock)
            daemon.request_shutdown()
    finally:
        tmux.kill()


async def test_an_idle_agent_is_woken_for_what_must_not_wait(mock_clock, tmp_path):
    async with office(mock_clock, tmp_path) as o:
        pane, out = await o.host("bob")
        await o.look_after(5)  # the pane sat at its prompt, watched, for 5 s
        await rpc(o.daemon, "message.send", {"caller": "alice", "content": "fyi", "to": ["@dev"]})  # may wait
        await trio.testing.wait_all_tasks_blocked()
        urgent = await o.urgent("bob")
        lines = await _until(lambda: wake_lines(out), "the wake-up", o.daemon)  # no more clock: its quiet was measured
        assert lines == [
            "You have 2 new thrum messages; run the thrum check (thrum inbox --unread --for-agent, or check_messages)."
        ]
        woken = await _until(lambda: o.daemon.services.waker.status("bob")["last"], "the wake-up recorded")
        assert woken["woke_for"] == [urgent] and woken["messages"] == 2


async def test_a_pane_watched_for_less_than_the_quiet_time_is_woken_when_it_has_been(mock_clock, tmp_path):
    async with office(mock_clock, tmp_path) as o:
        pane, out = await o.host("bob")
        await o.urgent("bob")
        await o.decided("bob", "active")  # first seen just now: not yet known to be quiet
        await o.look_after(1, decision=True)
        assert o.result("bob") == "active" and wake_lines(out) == []
        await o.look_after(2, decision=True)
        await _until(lambda: wake_lines(out), "the wake-up after 3 quiet seconds")


async def test_a_pane_where_someone_is_typing_is_not_woken(mock_clock, tmp_path):
    async with office(mock_clock, tmp_path) as o:
        pane, out = await o.host("bob")
        o.tmux("send-keys", "-t", pane, "-l", "half a sentence")  # typed, not sent
        await _until(lambda: "half a sentence" in o.tmux.screen(pane), "the typed text")
        await o.urgent("bob")
        await o.decided("bob", "active")  # the keys echoed: the screen changed
        for _ in range(3):
            await o.look_after(10, decision=True)  # quiet now, but the line holds typed text
            assert o.result("bob") == "typing"
        assert wake_lines(out) == []
        o.tmux("send-keys", "-t", pane, "C-u")  # the person clears the line: its keystrokes restart the quiet
        await _until(lambda: "half" not in o.tmux.screen(pane), "the cleared line")
        await o.look_after(1, decision=True)
        assert o.result("bob") == "active" and wake_lines(out) == []
        await o.look_after(3, decision=True)
        await _until(lambda: wake_lines(out), "the wake-up once the line is clear and quiet")


async def test_a_pane_whose_person_just_pressed_keys_is_not_woken(mock_clock, tmp_path):
    """A person at a terminal attached to the pane types a letter and takes it back: the screen ends as it
    was, only tmux's record of the client's keystrokes (real time, whole seconds) tells."""
    async with office(mock_clock, tmp_path) as o:
        pane, out = await o.host("bob")
        desk = Tmux(tmp_path)  # another server: its pane is the person's terminal, attached to bob's session
        try:
            attach = f"{TMUX} -L {o.tmux.name} attach -t sbob"
            desk("new-session", "-d", "-s", "desk", "-x", "120", "-y", "30", attach)
            await _until(lambda: o.tmux("list-clients", "-F", "#{client_session}").strip() == "sbob", "the terminal")
            await _until(lambda: o.tmux.screen(pane).rstrip().endswith(">"), "the prompt, seen through it")
            quiet = o.tmux.screen(pane)
            await o.look_after(5)
            desk("send-keys", "-t", "desk", "-l", "x")
            await _until(lambda: o.tmux.screen(pane) != quiet, "the letter")
            desk("send-keys", "-t", "desk", "BSpace")
            typed_at = time.time()
            await _until(lambda: o.tmux.screen(pane) == quiet, "the letter taken back")
            await o.look_after(5)  # quiet again on the daemon's clock; the keys are fresh in real time
            await o.urgent("bob")
            await _until(lambda: o.result("bob") is not None, "the waker's decision", o.daemon)
            if time.time() - typed_at > 1.9:  # tmux counts whole seconds: beyond this the keys may count as old
                pytest.skip("the machine was too slow to decide while the keystrokes were recent")
            assert o.result("bob") == "keystrokes" and wake_lines(out) == []
        finally:
            desk.kill()


async def test_an_agent_at_work_is_not_woken(mock_clock, tmp_path):
    """Its prompt is shown and empty (as in Claude Code while it works), but the screen keeps changing."""
    async with office(mock_clock, tmp_path) as o:
        pane, out = await o.host("bob", "--busy")
        await o.urgent("bob")
        await o.decided("bob", "active")
        for _ in range(4):  # 6 s of clock, the spinner turning between every two looks
            seen = o.tmux.screen(pane)
            await _until(lambda seen=seen: o.tmux.screen(pane) != seen, "the spinner to turn")
            await o.look_after(1.5, decision=True)
            assert o.result("bob") == "active"
        assert "new thrum message" not in o.tmux.screen(pane)


async def test_no_second_wake_up_within_the_quiet_period(mock_clock, tmp_path):
    async with office(mock_clock, tmp_path) as o:
        pane, out = await o.host("bob")
        await o.look_after(5)
        await o.urgent("bob")
        await _until(lambda: wake_lines(out), "the first wake-up")
        # the host does not answer (no turn, no hook): another urgent message does not wake it again
        await o.urgent("bob", "still broken")
        await o.decided("bob", "already woken in this quiet period")
        await o.look_after(60)
        decisions = o.daemon.services.waker.decisions
        await o.urgent("bob", "really broken")
        await _until(lambda: o.daemon.services.waker.decisions > decisions, "the waker to decide again")
        await o.look_after(60)
        assert len(wake_lines(out)) == 1 and o.result("bob") == "already woken in this quiet period"


async def test_second_and_third_wake_ups_come_after_the_agent_answered_and_went_idle(mock_clock, tmp_path):
    async with office(mock_clock, tmp_path) as o:
        pane, out = await o.host("bob", "--answer")
        await o.look_after(5)
        sent = await o.urgent("bob")
        for n in (1, 2, 3):
            lines = await _until(lambda n=n: len(wake_lines(out)) == n and wake_lines(out), f"wake-up {n}")
            assert lines[-1].startswith("You have 1 new thrum message;")
            await _until(lambda n=n: out.read_text().count("answered") == n, f"the host's answer {n}")
            await _until(lambda: o.tmux.screen(pane).rstrip().endswith(">"), "its prompt again")
            # its prompt hook showed the message: surfaced
            surfaced = {"caller": "bob", "message_ids": [sent], "via": "hook generic prompt"}
            await rpc(o.daemon, "message.surface", surfaced)
            if n == 3:
                break
            sent = await o.urgent("bob", f"and now deploy {n}")
            await o.decided("bob", "active")  # the answer's output: a new quiet period starts
            await o.look_after(1, decision=True)
            assert o.result("bob") == "active" and len(wake_lines(out)) == n
            await o.look_after(2, decision=True)  # 3 quiet seconds since the answer


async def test_a_pane_in_copy_mode_is_not_woken(mock_clock, tmp_path):
    """Keys typed into copy mode would be tmux commands, not the host's input."""
    async with office(mock_clock, tmp_path) as o:
        pane, out = await o.host("bob")
        o.tmux("copy-mode", "-t", pane)
        await o.look_after(5)
        await o.urgent("bob")
        await o.decided("bob", "copy mode")
        o.tmux("send-keys", "-t", pane, "-X", "cancel")
        await o.look_after(1, decision=True)  # the screen under copy mode did not change: still quiet
        await _until(lambda: wake_lines(out), "the wake-up after copy mode")

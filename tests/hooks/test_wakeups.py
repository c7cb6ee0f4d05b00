"""Idle wake-ups with a real tmux server (its own -L socket) and a fake host that reads its pane.

The fake host (fake_host.py) records its pane through its start hook, shows a
prompt and writes every line typed into it to a file, so a wake-up is a line there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from e2e_helpers import THRUM

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/run installs it)")
HOST = Path(__file__).with_name("fake_host.py")
DEADLINE = 20.0


def _until(check, what: str, deadline: float = DEADLINE):
    """Poll ``check`` until it returns something truthy (never a fixed sleep)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Tmux:
    def __init__(self, tmp: Path):
        self.name = f"thrum-test-{uuid.uuid4().hex[:12]}"
        self.tmp = tmp

    def __call__(self, *args: str, check: bool = True) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        proc = subprocess.run(
            [TMUX, "-L", self.name, "-f", "/dev/null", *args], capture_output=True, text=True, env=env
        )
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def host(self, repo, agent: str) -> tuple[str, Path]:
        """A fake host for ``agent`` in a new session; returns (pane id, its output file)."""
        out = self.tmp / f"{agent}.out"
        cmd = " ".join([sys.executable, str(HOST), str(out), THRUM, agent, str(repo.path)])
        session = f"s{agent}"
        self("new-session", "-d", "-s", session, "-x", "120", "-y", "30", "-e", "THRUM_WS_PORT=0", cmd)
        pane = self("display-message", "-p", "-t", session, "#{pane_id}").strip()
        _until(lambda: out.exists() and "started" in out.read_text(), "the fake host to start")
        _until(lambda: self("capture-pane", "-p", "-t", pane).rstrip().endswith(">"), "its prompt")
        return pane, out

    def kill(self) -> None:
        self("kill-server", check=False)


@pytest.fixture
def tmux(tmp_path):
    t = Tmux(tmp_path)
    yield t
    t.kill()


@pytest.fixture(scope="module")
def office(repo_factory):
    repo = repo_factory("office")
    repo.agent("alice", "lead")
    for name in ("bob", "cat", "dan"):
        repo.agent(name, f"{name}_role")
    return repo


def _status(repo, agent):
    from thrum import lifecycle
    from thrum.paths import resolve

    return lifecycle.call(resolve(repo.path), "agent.wake", {"caller": agent})


def _woken(out: Path) -> list[str]:
    return [line for line in out.read_text().splitlines() if "new thrum message" in line]


def test_an_idle_agent_is_woken_once(office, tmux):
    pane, out = tmux.host(office, "bob")
    assert _status(office, "bob")["pane"] == pane  # recorded by the start hook
    office.send("alice", "calm news", "--to", "@bob_role")  # not urgent: no wake-up
    office.send("alice", "the build is broken", "--to", "@bob", "--priority", "high")
    lines = _until(lambda: _woken(out), "the wake-up", deadline=DEADLINE)
    assert lines == [
        "You have 2 new thrum messages; run the thrum check (thrum inbox --unread --for-agent, or check_messages)."
    ]
    assert _status(office, "bob")["last"]["result"] == "woken"
    # the fake host does not answer (no turn, no hook): another urgent message does not wake it again
    office.send("alice", "still broken", "--to", "@bob", "--priority", "critical")
    _until(
        lambda: _status(office, "bob")["last"]["result"] == "already woken in this quiet period",
        "the waker to look and decline",
    )
    assert len(_woken(out)) == 1


def test_a_pane_where_someone_is_typing_is_not_woken(office, tmux):
    pane, out = tmux.host(office, "cat")
    tmux("send-keys", "-t", pane, "-l", "half a sentence")  # typed, not sent
    _until(lambda: "half a sentence" in tmux("capture-pane", "-p", "-t", pane), "the typed text")
    office.send("alice", "urgent for cat", "--to", "@cat")
    _until(lambda: (_status(office, "cat")["last"] or {}).get("result") == "typing", "the waker to see the typing")
    assert _woken(out) == []
    tmux("send-keys", "-t", pane, "C-u")  # the person clears the line: now it is idle, and the waker gets through
    _until(lambda: _woken(out), "the wake-up once the line is clear")


def test_wake_ups_can_be_turned_off(office, tmux):
    pane, out = tmux.host(office, "dan")
    office.ok("wake", "off", agent="dan")
    assert _status(office, "dan")["enabled"] is False
    office.send("alice", "urgent for dan", "--to", "@dan")
    # the hook still shows it; nothing is typed into the pane
    code = office.run("hook", "generic", "prompt", "--agent", "dan", stdin="")
    assert "urgent for dan" in code.out
    assert _woken(out) == [] and _status(office, "dan")["last"] is None
    status = office.ok("wake", "status", "--json", agent="dan").json()
    assert status["enabled"] is False and status["pane"] == pane

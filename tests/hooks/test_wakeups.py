"""Idle wake-ups end to end: the installed ``thrum``, its daemon, a real tmux server (its own -L socket)
and a fake host that runs its hooks and reads its pane (fake_host.py).

The rules themselves (typing, an agent at work, the quiet period, copy mode) are
tested on the daemon's own clock in test_wake_rules.py; here the whole path runs
in real time: the start hook records the pane, a message wakes the host, its
prompt hook shows the messages, and the next message wakes it again.
"""

from __future__ import annotations

import pytest

from e2e_helpers import THRUM
from tmux_helpers import TMUX, Tmux, until, wake_lines

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/run installs it)")


@pytest.fixture
def tmux(tmp_path):
    t = Tmux(tmp_path)
    yield t
    t.kill()


@pytest.fixture(scope="module")
def office(repo_factory):
    repo = repo_factory("office")
    repo.agent("alice", "lead")
    for name in ("bob", "dan"):
        repo.agent(name, f"{name}_role")
    return repo


def _host(tmux: Tmux, repo, agent: str, *args: str):
    return tmux.host(
        agent, "--thrum", THRUM, "--agent", agent, "--repo", str(repo.path), *args, env=("THRUM_WS_PORT=0",)
    )


def _status(repo, agent):
    return repo.ok("wake", "status", "--json", agent=agent).json()


def test_an_idle_agent_is_woken_and_woken_again_each_time_it_answered(office, tmux):
    pane, out = _host(tmux, office, "bob", "--answer")
    assert _status(office, "bob")["pane"] == pane  # recorded by the start hook
    office.send("alice", "calm news", "--to", "@bob_role")  # not urgent: no wake-up
    office.send("alice", "the build is broken", "--to", "@bob", "--priority", "high")
    lines = until(lambda: wake_lines(out), "the wake-up")
    assert lines == [
        "You have 2 new thrum messages; run the thrum check (thrum inbox --unread --for-agent, or check_messages)."
    ]
    until(lambda: "answered" in out.read_text(), "the host's answer (its prompt hook)")
    shown = tmux("capture-pane", "-p", "-J", "-S", "-", "-t", pane)
    assert "│ the build is broken" in shown and "│ calm news" in shown  # the hook showed both, framed
    assert office.run("hook", "generic", "prompt", "--agent", "bob", stdin="").out == ""  # once
    for n, text in ((2, "and the deploy too"), (3, "and the docs")):  # answered, idle again: woken again
        office.send("alice", text, "--to", "@bob", "--priority", "critical")
        lines = until(lambda n=n: len(wake_lines(out)) == n and wake_lines(out), f"wake-up {n}")
        assert lines[-1].startswith("You have 1 new thrum message;")
        until(lambda n=n: out.read_text().count("answered") == n, f"the host's answer {n}")
        assert f"│ {text}" in tmux("capture-pane", "-p", "-J", "-S", "-", "-t", pane)
    assert _status(office, "bob")["last"]["result"] == "woken"


def test_wake_ups_can_be_turned_off(office, tmux):
    pane, out = _host(tmux, office, "dan")
    office.ok("wake", "off", agent="dan")
    assert _status(office, "dan")["enabled"] is False
    office.send("alice", "urgent for dan", "--to", "@dan")
    # the hook still shows it; nothing is typed into the pane
    code = office.run("hook", "generic", "prompt", "--agent", "dan", stdin="")
    assert "urgent for dan" in code.out
    assert wake_lines(out) == [] and _status(office, "dan")["last"] is None
    status = _status(office, "dan")
    assert status["enabled"] is False and status["pane"] == pane

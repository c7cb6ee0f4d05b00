"""Set-up and daemon control through the installed CLI: init, autostart,
THRUM_NO_AUTOSTART, daemon start/stop/status, linked worktrees."""

from __future__ import annotations

import subprocess

import pygit2

from e2e_helpers import Repo, base_env


def test_init_refuses_outside_a_git_repository(tmp_path):
    r = Repo(tmp_path).run("init", "--non-interactive")
    assert r.code == 1
    assert "not a git repository" in r.err_line
    assert not (tmp_path / ".thrum").exists()


def test_init_is_idempotent_and_starts_the_daemon(fresh):
    first = fresh.ok("init", "--non-interactive")
    assert first.out.startswith(f"> Initialised thrum in {fresh.path}\n")
    assert "Daemon:  started (pid " in first.out
    second = fresh.ok("init", "--non-interactive")
    assert "Daemon:  already running (pid " in second.out
    assert (fresh.path / ".thrum" / "identities").is_dir()
    assert fresh.ok("daemon", "status", "--json").json()["running"] is True
    # the user's work tree is untouched: .thrum is ignored
    repo = pygit2.Repository(str(fresh.path))
    assert repo.status() == {}


def test_daemon_commands_and_autostart(fresh):
    fresh.init()
    fresh.agent("alice", "implementer")
    status = fresh.ok("daemon", "status").out
    assert status.startswith("Daemon:  running (pid ")
    assert fresh.ok("daemon", "start").out.startswith("Daemon already running (pid ")
    assert fresh.ok("daemon", "stop").out.startswith("> Daemon stopped (pid ")
    stopped = fresh.run("daemon", "status")  # exit 3 when not running (for scripts)
    assert stopped.code == 3 and stopped.out.startswith("Daemon:  not running")
    stopped = fresh.run("daemon", "status", "--json")
    assert stopped.code == 3 and stopped.json()["running"] is False
    assert fresh.ok("daemon", "stop").out == "Daemon is not running\n"

    r = fresh.run("inbox", env={"THRUM_NO_AUTOSTART": "1"})
    assert r.code == 1
    assert "THRUM_NO_AUTOSTART" in r.err_line

    r = fresh.ok("inbox", env={"THRUM_NO_AUTOSTART": "false"})  # "false" means autostart stays on
    assert "starting daemon" in r.err and r.out == "No messages in inbox.\n"
    fresh.ok("daemon", "stop")
    r = fresh.ok("inbox")  # starts the daemon and says so
    assert "starting daemon" in r.err
    assert r.out == "No messages in inbox.\n"
    assert fresh.ok("inbox", "--quiet").err == ""
    restarted = fresh.ok("daemon", "restart").out
    assert restarted.startswith("> Daemon restarted (pid ")


def test_linked_worktree_shares_the_daemon(fresh, tmp_path):
    fresh.init()
    fresh.agent("alice", "implementer")
    wt = tmp_path / "wt"
    subprocess.run(
        ["git", "worktree", "add", "-q", "-b", "feature", str(wt)],
        cwd=fresh.path,
        check=True,
        env=base_env(),
        capture_output=True,
    )
    linked = Repo(wt)
    linked.ok("init", "--non-interactive")
    redirect = wt / ".thrum" / "redirect"
    assert redirect.read_text().strip() == str((fresh.path / ".thrum").resolve())

    main_pid = fresh.ok("daemon", "status", "--json").json()["pid"]
    assert linked.ok("daemon", "status", "--json").json()["pid"] == main_pid

    linked.ok("quickstart", "--name", "wt_agent", "--role", "reviewer", "--quiet", agent="wt_agent")
    mid = linked.send("wt_agent", "hello from the worktree")
    assert mid in fresh.ok("inbox", agent="alice").out
    # identity auto-selection by worktree: only wt_agent registered from the linked checkout
    assert linked.ok("whoami").out.startswith("Agent:   @wt_agent")


def test_init_without_a_tty_never_prompts(fresh):
    r = fresh.run("init", "--no-daemon", stdin="")
    assert r.code == 0
    assert "Daemon:  not started" in r.out
    assert "Agent name" not in r.out
    assert list((fresh.path / ".thrum" / "identities").iterdir()) == []


def test_init_on_a_tty_offers_to_register_an_agent(fresh):
    import os
    import pty

    from e2e_helpers import THRUM

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [THRUM, "init"],
        cwd=fresh.path,
        env=base_env(),
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    os.write(leader, b"tty_agent\nimplementer\nauth\n")
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=60) == 0, out
    os.close(leader)
    text = out.decode(errors="replace")
    assert "Agent name" in text
    assert "> Agent registered: @tty_agent" in text
    assert (fresh.path / ".thrum" / "identities" / "tty_agent.json").exists()

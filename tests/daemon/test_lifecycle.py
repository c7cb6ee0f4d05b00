"""Daemon lifecycle: double start, stale socket, crash recovery, graceful stop."""

from __future__ import annotations

import os
import signal

from thrum import lifecycle

from daemon_helpers import RawClient, register


def test_second_start_says_already_running(daemon):
    pid = lifecycle.read_pid(daemon)
    again = lifecycle.start(daemon)
    assert again == {"started": False, "already_running": True, "pid": pid}
    status = lifecycle.status(daemon)
    assert status["running"] is True
    assert status["pid"] == pid
    assert status["socket"] == str(daemon.socket)
    assert status["repo"] == str(daemon.main_repo)
    assert status["uptime"] >= 0


def test_stop_is_graceful_and_removes_socket_and_pid(daemon):
    c = RawClient(daemon)
    register(c, "alice", "implementer")
    c.call("session.start", {"caller": "alice"})
    c.close()
    assert lifecycle.stop(daemon)["stopped"] is True
    assert not daemon.socket.exists()
    assert not daemon.pid_file.exists()
    assert lifecycle.status(daemon)["running"] is False
    lifecycle.start(daemon)
    c = RawClient(daemon)
    sessions = c.call("session.list", {"agent": "alice"})["sessions"]
    assert sessions
    assert all(s["end_reason"] == "normal" for s in sessions)
    c.close()


def test_stale_socket_from_a_crash_is_cleaned_up(daemon):
    lifecycle.stop(daemon)
    daemon.socket.write_text("stale")  # a leftover file where the socket lives
    assert lifecycle.start(daemon)["started"] is True
    c = RawClient(daemon)
    assert c.call("health")["status"] == "ok"
    c.close()


def test_sigkill_loses_no_acknowledged_message_and_marks_sessions_crashed(daemon):
    c = RawClient(daemon)
    register(c, "alice", "implementer")
    ids = [c.call("message.send", {"caller": "alice", "content": f"m{i}"})["message_id"] for i in range(50)]
    session = c.call("session.list", {"agent": "alice", "active_only": True})["sessions"][0]["session_id"]
    c.close()
    os.kill(lifecycle.read_pid(daemon), signal.SIGKILL)
    lifecycle.wait_stopped(daemon, 10)
    os.unlink(daemon.var / "messages.db")  # even the projection is gone: the log is the truth
    assert lifecycle.start(daemon)["started"] is True
    c = RawClient(daemon)
    listed = c.call("message.list", {"page_size": 100})
    assert sorted(m["message_id"] for m in listed["messages"]) == sorted(ids)
    ended = {s["session_id"]: s for s in c.call("session.list", {"agent": "alice"})["sessions"]}
    assert ended[session]["end_reason"] == "crash"
    c.close()


def test_commands_refuse_outside_a_repository(tmp_path):
    import pytest

    from thrum.paths import NotARepository

    plain = tmp_path / "plain-dir"
    plain.mkdir()
    with pytest.raises(NotARepository):
        lifecycle.init_repo(plain)
    assert list(plain.iterdir()) == []


def test_repository_path_too_long_for_a_socket_address_still_works(tmp_path, monkeypatch):
    from fixtures.repos.builders import make_repo

    monkeypatch.setenv("THRUM_LOCAL", "1")
    monkeypatch.setenv("THRUM_WS_PORT", "0")
    deep = tmp_path.joinpath(*(["a-rather-long-directory-name"] * 5), "repo")
    assert len(str(deep / ".thrum" / "var" / "thrum.sock")) > 108
    make_repo(deep)
    paths = lifecycle.init_repo(deep)
    try:
        assert len(str(paths.socket)) <= 100
        c = RawClient(paths)
        assert c.call("health")["status"] == "ok"
        c.close()
    finally:
        lifecycle.stop(paths)


def test_daemon_run_serves_in_the_foreground_until_sigterm(repo, monkeypatch):
    import shutil
    import subprocess
    import sys

    monkeypatch.setenv("THRUM_LOCAL", "1")
    monkeypatch.setenv("THRUM_WS_PORT", "0")
    paths = lifecycle.init_repo(repo, start_daemon=False)
    thrum = shutil.which("thrum") or str(__import__("pathlib").Path(sys.executable).parent / "thrum")
    proc = subprocess.Popen([thrum, "daemon", "run"], cwd=repo, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:  # the daemon logs to stderr in the foreground; wait for "ready"
            if " ready " in line:
                break
        c = RawClient(paths)
        assert c.call("health")["pid"] == proc.pid == lifecycle.read_pid(paths)
        c.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert not paths.socket.exists()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_broken_config_is_one_clear_start_up_error(daemon):
    import pytest

    from thrum import errors

    lifecycle.stop(daemon)
    daemon.config.write_text("{not json")
    with pytest.raises(errors.Unavailable) as info:
        lifecycle.start(daemon)
    assert "config.json: not valid JSON" in info.value.message
    assert "\n" not in info.value.message
    assert lifecycle.status(daemon)["running"] is False
    daemon.config.write_text('{"sync_interval": 5}')
    assert lifecycle.start(daemon)["started"] is True


def test_a_corrupt_projection_is_rebuilt_from_the_log(daemon):
    c = RawClient(daemon)
    register(c, "alice", "implementer")
    mid = c.call("message.send", {"caller": "alice", "content": "survives"})["message_id"]
    c.close()
    lifecycle.stop(daemon)
    for suffix in ("-wal", "-shm"):
        (daemon.var / f"messages.db{suffix}").unlink(missing_ok=True)
    daemon.database.write_bytes(b"this is not a database" * 1000)
    assert lifecycle.start(daemon)["started"] is True
    c = RawClient(daemon)
    assert c.call("message.get", {"message_id": mid})["message"]["body"]["content"] == "survives"
    c.close()


def test_a_starter_that_finds_a_daemon_still_opening_waits_until_it_listens(tmp_path):
    import fcntl
    import threading

    from fixtures.repos.builders import make_repo
    from thrum.paths import resolve

    repo = tmp_path / "repo"
    make_repo(repo)
    lifecycle.init_repo(repo, start_daemon=False)
    paths = resolve(repo)
    paths.var.mkdir(parents=True, exist_ok=True)
    held = os.open(paths.starting_lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)  # as a daemon does between taking its lock and listening
    done = threading.Event()
    threading.Thread(target=lambda: (lifecycle._wait_until_listening(paths, 30), done.set()), daemon=True).start()
    assert not done.wait(0.3)
    os.close(held)  # the daemon listens (or dies): the kernel drops the lock
    assert done.wait(10)


def test_a_start_up_rebuild_reports_its_progress_to_the_starter(daemon):
    """A daemon that must build its projection first (a new clone, an upgrade) tells the
    process waiting for it how far it is, then says it listens; nothing is lost."""
    c = RawClient(daemon)
    register(c, "alice", "implementer")
    sent = [c.call("message.send", {"caller": "alice", "content": f"note {i}"})["message_id"] for i in range(5)]
    c.close()
    lifecycle.stop(daemon)
    for suffix in ("", "-wal", "-shm"):
        (daemon.var / f"messages.db{suffix}").unlink(missing_ok=True)
    reports: list[dict] = []
    assert lifecycle.start(daemon, on_progress=reports.append)["started"] is True
    phases = [r["phase"] for r in reports]
    assert phases[-2:] == ["indexes", "done"] and "load" in phases
    last_load = [r for r in reports if r["phase"] == "load"][-1]
    assert last_load["bytes"] == last_load["total_bytes"] > 0
    assert reports[-1]["events"] >= len(sent) + 1  # the registration, the sends (and their sessions)
    c = RawClient(daemon)
    assert {m["message_id"] for m in c.call("message.list", {"caller": "alice", "page_size": 50})["messages"]} >= set(
        sent
    )
    c.close()
    reports.clear()
    lifecycle.stop(daemon)
    assert lifecycle.start(daemon, on_progress=reports.append)["started"] is True
    assert reports == []  # a projection that is current needs no rebuild: nothing to report

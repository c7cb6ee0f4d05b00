"""A sync stuck on a remote that accepts the connection and never answers (audit of
issues 12 and 15): ``sync status`` and ``doctor`` answer while it waits, and the daemon
stops and restarts without waiting for the network timeout, losing nothing.

The remote is a real TCP listener on loopback that accepts and never says a word
(`fixtures.servers.tcp.SilentServer`); the network timeout is set far beyond any
wait of these tests, so a command that waited for the stuck sync would never return
in time (each wait below is a safety net, not a measurement).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from fixtures.servers.tcp import SilentServer
from fixtures.waiting import until
from thrum import lifecycle

from faults_helpers import daemon_env, start_daemon

pytestmark = pytest.mark.long_file  # a minute and more under load: started first (tests/conftest.py)

THRUM = shutil.which("thrum") or str(Path(sys.executable).parent / "thrum")
STUCK = {"local_only": False, "sync_interval": 3600, "sync_debounce": 3600, "net_timeout": 900}


def _thrum(d, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    with daemon_env():
        return subprocess.run(
            [THRUM, *args],
            cwd=d.repo,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "THRUM_NO_AUTOSTART": "1"},
        )


def _stuck_sync(d, silent: SilentServer, connections: int) -> subprocess.Popen:
    """`thrum sync` in the background, once the daemon's fetch holds a connection to the silent remote
    and the command is connected to the daemon.

    A new name's registration fetches first, so the silent remote may already hold the
    daemon's fetch before the command starts: the command must also be seen connected,
    or a slow start-up would find the daemon stopped and run the sync itself.
    """
    before = d.call("daemon.status")["connections"]
    with daemon_env():
        proc = subprocess.Popen([THRUM, "sync"], cwd=d.repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def reached() -> bool:
        assert proc.poll() is None, proc.communicate()
        return silent.accepted >= connections and d.call("daemon.status")["connections"] > before

    until(reached, "the sync to reach the daemon and the remote", timeout=60)
    return proc


@pytest.fixture
def stuck(tmp_path):
    """A daemon whose remote ``origin`` is a silent TCP listener."""
    silent = SilentServer().start()
    d = start_daemon(tmp_path / "a", STUCK, start=False)
    pygit2.Repository(str(d.repo)).remotes.create("origin", f"http://127.0.0.1:{silent.port}/team.git")
    d.start()
    try:
        yield d, silent
    finally:
        silent.stop()  # a stuck fetch fails now, so even a daemon that waits for it can stop
        lifecycle.stop(d.paths, timeout=120)


def test_sync_status_and_doctor_answer_while_a_sync_waits_on_a_silent_remote(stuck):
    d, silent = stuck
    d.register("alice")
    d.call("message.send", {"caller": "alice", "content": "before the sync"})
    proc = _stuck_sync(d, silent, 1)
    status = d.call("sync.status", timeout=20)
    assert status["mode"] == "remote" and status["syncing_since"] is not None
    assert status["last_error"] is None and status["pending_events"] >= 1
    assert status["ignored_paths_by_reason"] is None  # not known before a cycle finished: not waited for
    text = _thrum(d, "sync", "status", timeout=20)
    assert text.returncode == 0 and "Syncing:       since " in text.stdout, text
    doctor = _thrum(d, "doctor", "--json", timeout=30)
    checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 1  # the remote needs attention
    remote = checks["remote"]
    assert remote["status"] == "warn" and "has waited" in remote["detail"] and "to answer" in remote["detail"]
    assert f"127.0.0.1:{silent.port}" in remote["detail"] and remote["action"]
    assert checks["projection"]["status"] == "ok" and checks["worktree"]["status"] == "ok"
    assert proc.poll() is None  # the sync still waits: nobody waited it out
    assert silent.accepted == 1  # and the doctor opened no second connection to the silent remote


def test_the_daemon_stops_and_restarts_while_a_sync_waits_on_a_silent_remote(stuck, tmp_path):
    d, silent = stuck
    d.register("alice")
    acked = [d.call("message.send", {"caller": "alice", "content": "before the stop"})["message_id"]]
    proc = _stuck_sync(d, silent, 1)
    stopped = _thrum(d, "daemon", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not lifecycle.is_running(d.paths)
    out, err = proc.communicate(timeout=60)  # the waiting `thrum sync` is told, in one line
    assert proc.returncode == 1 and out == "" and err.startswith("thrum: ") and err.count("\n") == 1, err
    assert "sync abandoned while it waited for the remote" in d.log_text()

    assert _thrum(d, "daemon", "start").returncode == 0
    listed = d.call("message.list", {"page_size": 10})["messages"]
    assert [m["message_id"] for m in listed] == acked
    acked.append(d.call("message.send", {"caller": "alice", "content": "after the start"})["message_id"])
    proc = _stuck_sync(d, silent, 2)
    restarted = _thrum(d, "daemon", "restart")
    assert restarted.returncode == 0, restarted.stderr
    assert d.call("health")["status"] == "ok"
    proc.communicate(timeout=60)
    assert proc.returncode == 1

    # Nothing was left half done: pointed at a remote that answers, the next sync pushes everything once.
    bare = tmp_path / "remote.git"
    pygit2.init_repository(str(bare), bare=True)
    pygit2.Repository(str(d.repo)).remotes.set_url("origin", str(bare))
    report = d.call("sync.run", timeout=60)
    assert report["ok"] and report["pushed"]
    counts = collections.Counter(e["message_id"] for e in d.log_events("message.create"))
    assert all(counts[m] == 1 for m in acked) and sum(counts.values()) == len(acked)
    remote = pygit2.Repository(str(bare))
    tree = remote[remote.references["refs/heads/a-sync"].target].peel(pygit2.Tree)
    pushed = b"".join(_blobs(remote, tree))
    assert all(m.encode() in pushed for m in acked)


def _blobs(repo, tree):
    for entry in tree:
        obj = repo[entry.id]
        if isinstance(obj, pygit2.Tree):
            yield from _blobs(repo, obj)
        else:
            yield obj.data

"""A daemon whose checkout is deleted notices and exits (issue 30, item 11)."""

from __future__ import annotations

import shutil
from pathlib import Path

from fixtures.repos.builders import make_repo
from fixtures.waiting import until
from thrum import lifecycle


def _running(pid: int) -> bool:
    """Alive and not a zombie (the daemon is this process's child until reaped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def test_a_daemon_exits_when_its_checkout_is_deleted(tmp_path, monkeypatch):
    monkeypatch.setenv("THRUM_LOCAL", "1")
    monkeypatch.setenv("THRUM_WS_PORT", "0")
    repo = tmp_path / "repo"
    make_repo(repo)
    paths = lifecycle.init_repo(repo)
    pid = lifecycle.read_pid(paths)
    assert pid and _running(pid)
    shutil.rmtree(repo)
    until(lambda: not _running(pid), "the daemon to exit without its checkout", timeout=60, every=0.1)

"""`thrum wait` across a daemon restart (issue 30, item 8): it reconnects and keeps
waiting until its own deadline, as the MCP waiter does, and gets the message sent
after the restart."""

from __future__ import annotations

import os
import subprocess
import sys

from realtime_helpers import start_daemon


def test_thrum_wait_keeps_waiting_through_a_daemon_restart(tmp_path):
    d = start_daemon(tmp_path)
    try:
        d.register("sender", "implementer")
        d.register("waiter", "reviewer", identity_file=True)
        d.call("message.markRead", {"caller": "waiter", "all": True})
        env = {**os.environ, "THRUM_NAME": "waiter", "THRUM_NO_AUTOSTART": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "thrum.cli.main", "wait", "--timeout", "60"],
            cwd=d.repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        d.stop()
        d.start()
        d.send("sender", "after the restart", mentions=["@waiter"])
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "after the restart" in out
    finally:
        d.stop()

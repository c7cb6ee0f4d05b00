"""A tmux server of a test's own (``tmux -L <unique>``) and fake hosts in its panes (fake_host.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from fixtures import waiting

TMUX = shutil.which("tmux")
HOST = Path(__file__).with_name("fake_host.py")
DEADLINE = 20.0


def until(check, what: str, deadline: float = DEADLINE):
    """Poll ``check`` until it returns something truthy (never a fixed sleep)."""
    return waiting.until(check, what, timeout=deadline, every=0.02)


def wake_lines(out: Path) -> list[str]:
    """The wake-up prompts a fake host read (one per wake-up)."""
    return [line for line in out.read_text().splitlines() if "new thrum message" in line]


class Tmux:
    """A tmux server of one test; stopped with `kill`."""

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

    def host(self, agent: str, *args: str, env: tuple[str, ...] = ()) -> tuple[str, Path]:
        """A fake host for ``agent`` in a new session (``args`` for fake_host.py); returns (pane id, its OUT file)."""
        out = self.tmp / f"{agent}.out"
        cmd = " ".join([sys.executable, str(HOST), str(out), *args])
        session = f"s{agent}"
        extra = [x for e in env for x in ("-e", e)]
        self("new-session", "-d", "-s", session, "-x", "120", "-y", "30", *extra, cmd)
        pane = self("display-message", "-p", "-t", session, "#{pane_id}").strip()
        until(lambda: out.exists() and "started" in out.read_text(), "the fake host to start")
        until(lambda: self.screen(pane).rstrip().endswith(">"), "its prompt")
        return pane, out

    def screen(self, pane: str) -> str:
        return self("capture-pane", "-p", "-t", pane)

    @property
    def env(self) -> str:
        """What ``TMUX`` holds in this server's panes (the socket path first)."""
        return self("display-message", "-p", "#{socket_path},0,0").strip()

    def kill(self) -> None:
        self("kill-server", check=False)

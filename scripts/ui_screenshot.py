#!/usr/bin/env python3
"""Make the README's screenshot of the Web UI (docs/images/ui.png).

A throw-away repository gets a small team and a short conversation; headless
Chromium (Debian's chromium + chromium-driver) opens the UI as the human "dana",
opens one thread and takes the picture. Run with the venv's python::

    python scripts/ui_screenshot.py [--out docs/images/ui.png] [--width 1280 --height 800]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "ui"))

from fixtures.repos.builders import make_repo  # noqa: E402
from thrum.client import Client  # noqa: E402
from thrum.paths import resolve  # noqa: E402
from ui_helpers import browser_missing, env, start_browser, stop_browser  # noqa: E402

THRUM = shutil.which("thrum") or str(Path(sys.executable).parent / "thrum")
TEAM = [
    ("maya", "planner", "", "user"),
    ("alice", "implementer", "auth", "agent"),
    ("bob", "reviewer", "auth", "agent"),
    ("carol", "tester", "auth", "agent"),
    ("otto", "ops", "deploy", "agent"),
    ("dana", "human", "", "user"),
]


def conversation(c: Client) -> str:
    """Send the story; returns the id of the message whose thread is shown."""

    def send(who, text, **kw):
        return c.call("message.send", {"caller": who, "content": text, **kw})["message_id"]

    send(
        "maya",
        "Sprint goal: ship OAuth login by Friday. Backend to @implementer, the e2e suite to @tester.",
        to=["implementer", "tester"],
        scopes=[{"type": "module", "value": "auth"}],
        priority="high",
    )
    pr = send(
        "alice",
        "Token refresh endpoint is ready for review: PR #214. Unit tests green locally.",
        to=["reviewer"],
        scopes=[{"type": "module", "value": "auth"}],
        refs=[{"type": "pr", "value": "214"}],
    )
    send("bob", "Looks good overall. One question: what happens with clock skew near expiry?", reply_to=pr)
    send("alice", "Added a 30 s leeway and a test that fakes a skewed clock. Pushed.", reply_to=pr)
    send(
        "otto",
        "Staging deploy of auth-service 1.8.0 complete; health checks passing.",
        scopes=[{"type": "env", "value": "staging"}],
    )
    send(
        "carol",
        "E2E suite for the login flow is up: 14 scenarios, 2 failing on Safari (cookie partitioning).",
        to=["implementer"],
        scopes=[{"type": "module", "value": "auth"}],
        refs=[{"type": "issue", "value": "88"}],
    )
    send(
        "dana",
        "Great progress. Let's hold the release until the Safari failures are understood.",
        to=["everyone"],
        priority="high",
    )
    send("bob", "Approved PR #214 after the leeway fix.", reply_to=pr)
    return pr


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "images" / "ui.png"))
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--height", type=int, default=800)
    args = p.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"cannot take the screenshot: {missing}", file=sys.stderr)
        return 1
    base = Path(tempfile.mkdtemp(prefix="thrum-shot-"))
    repo = base / "repo"
    make_repo(repo)
    e = env(THRUM_LOCAL="1")
    driver = None
    try:
        subprocess.run([THRUM, "init", "--non-interactive"], cwd=repo, env=e, check=True, capture_output=True)
        paths = resolve(repo)
        with Client(paths) as c:
            for name, role, module, kind in TEAM:
                c.call("agent.register", {"name": name, "role": role, "module": module, "kind": kind})
            pr = conversation(c)
            c.call("message.markRead", {"caller": "bob", "all": True})
            url = c.call("ui.open", {"port": 0})["url"]
        driver = start_browser(args.width, args.height)
        driver.get(url)
        driver.execute_script("localStorage.setItem('thrum.me', 'dana'); location.reload()")
        deadline = time.monotonic() + 20
        while not driver.execute_script(f"return !!document.querySelector('#main .msg[data-id=\"{pr}\"]')"):
            if time.monotonic() > deadline:
                raise RuntimeError("the feed did not show up")
            time.sleep(0.05)
        driver.execute_script(f"document.querySelector('#main .msg[data-id=\"{pr}\"]').click()")
        while driver.execute_script("return document.querySelectorAll('#thread .msg').length") < 4:
            if time.monotonic() > deadline:
                raise RuntimeError("the thread did not show up")
            time.sleep(0.05)
        time.sleep(2.5)  # let the "new message" highlights fade
        driver.execute_script("document.getElementById('toasts').replaceChildren(); document.activeElement.blur()")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(args.out)
        print(args.out)
    finally:
        if driver is not None:
            stop_browser(driver)
        subprocess.run([THRUM, "daemon", "stop"], cwd=repo, env=e, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

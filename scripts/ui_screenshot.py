#!/usr/bin/env python3
"""Make the screenshots of the Web UI in docs/images/: the main views, light, dark and phone.

A throw-away repository gets a small team and a short conversation; headless
Chromium (Debian's chromium + chromium-driver) opens the UI as the human "dana"
and takes the pictures:

- ``ui.png``: the feed with a thread open (light; the README's picture)
- ``ui-dark.png``: the same, dark
- ``ui-inbox.png``: an agent's inbox with unread messages and the read divider (light)
- ``ui-agents-dark.png``: agents and groups (dark)
- ``ui-phone.png`` / ``ui-phone-dark.png``: the feed on a 390 px wide phone

Run with the venv's python::

    python scripts/ui_screenshot.py [--out docs/images] [--width 1280 --height 800]
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
    ("maya", "planner", "", "user", "Maya Chen"),
    ("alice", "implementer", "auth", "agent", ""),
    ("bob", "reviewer", "auth", "agent", ""),
    ("carol", "tester", "auth", "agent", ""),
    ("otto", "ops", "deploy", "agent", ""),
    ("dana", "human", "", "user", "Dana Scully"),
]


def conversation(c: Client) -> str:
    """Send the story; returns the id of the message whose thread is shown."""

    def send(who, text, **kw):
        return c.call("message.send", {"caller": who, "content": text, **kw})["message_id"]

    send(
        "maya",
        "Sprint goal: ship **OAuth login** by Friday. Backend to @implementer, the e2e suite to @tester.",
        to=["implementer", "tester"],
        subject="Sprint 14: OAuth login",
        scopes=[{"type": "module", "value": "auth"}],
        priority="high",
    )
    pr = send(
        "alice",
        "Token refresh endpoint is ready for review: PR #214.\n\n- refresh rotates the token\n"
        "- `POST /oauth/refresh` returns `401` on reuse\n\nUnit tests green locally.",
        to=["reviewer"],
        subject="Review: token refresh (PR #214)",
        scopes=[{"type": "module", "value": "auth"}],
        refs=[{"type": "pr", "value": "214"}],
    )
    send("bob", "Looks good overall. One question: what happens with *clock skew* near expiry?", reply_to=pr)
    send("alice", "Added a 30 s leeway and a test that fakes a skewed clock. Pushed.", reply_to=pr)
    send(
        "otto",
        "Staging deploy of `auth-service` 1.8.0 complete; health checks passing.",
        scopes=[{"type": "env", "value": "staging"}],
        structured={"service": "auth-service", "version": "1.8.0", "checks": {"passed": 12, "failed": 0}},
    )
    send(
        "carol",
        "E2E suite for the login flow is up: 14 scenarios, **2 failing** on Safari (cookie partitioning).",
        to=["implementer", "dana"],
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
    send("otto", "Disk on `build-3` at 91%: cleaning caches now.", to=["human"], priority="critical")
    return pr


def wait(driver, script: str, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not driver.execute_script(script):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not show up")
        time.sleep(0.05)


def shoot(driver, path: Path) -> None:
    time.sleep(2.2)  # let the "new message" highlights fade
    driver.execute_script("document.getElementById('toasts').replaceChildren(); document.activeElement.blur()")
    driver.save_screenshot(str(path))
    print(path)


def dark(driver, on: bool) -> None:
    value = "dark" if on else "light"
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": value}]}
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "images"))
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--height", type=int, default=800)
    args = p.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"cannot take the screenshots: {missing}", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="thrum-shot-"))
    repo = base / "repo"
    make_repo(repo)
    e = env(THRUM_LOCAL="1")
    driver = None
    try:
        subprocess.run([THRUM, "init", "--non-interactive"], cwd=repo, env=e, check=True, capture_output=True)
        paths = resolve(repo)
        with Client(paths) as c:
            for name, role, module, kind, display in TEAM:
                params = {"name": name, "role": role, "module": module, "kind": kind}
                if display:
                    params["display"] = display
                c.call("agent.register", params)
            c.call("group.create", {"caller": "maya", "name": "auth-team", "description": "everyone on OAuth"})
            c.call("group.member.add", {"caller": "maya", "group": "auth-team", "member": "alice"})
            c.call(
                "group.member.add", {"caller": "maya", "group": "auth-team", "member": "tester", "member_type": "role"}
            )
            pr = conversation(c)
            c.call("message.markRead", {"caller": "bob", "all": True})
            c.call("message.markRead", {"caller": "carol", "message_ids": [pr]})
            url = c.call("ui.open", {"port": 0})["url"]
        driver = start_browser(args.width, args.height)
        driver.get(url)
        driver.execute_script("localStorage.setItem('thrum.me', 'dana'); location.reload()")
        msg = f'#main .msg[data-id="{pr}"]'
        wait(driver, f"return !!document.querySelector('{msg}') && document.body.dataset.conn === 'live'", "the feed")
        driver.execute_script(f"document.querySelector('{msg} .body').click()")
        wait(driver, "return document.querySelectorAll('#thread .msg').length >= 4", "the thread")
        shoot(driver, out / "ui.png")
        dark(driver, True)
        shoot(driver, out / "ui-dark.png")
        dark(driver, False)
        driver.execute_script("document.querySelector('#thread button.close').click(); location.hash = '#/inbox/carol'")
        wait(driver, "return document.querySelectorAll('#main .msg').length > 3", "carol's inbox")
        shoot(driver, out / "ui-inbox.png")
        driver.execute_script("location.hash = '#/agents'")
        wait(driver, "return !!document.querySelector('#main tr[data-group=\"auth-team\"]')", "the groups")
        dark(driver, True)
        shoot(driver, out / "ui-agents-dark.png")
        dark(driver, False)
        driver.set_window_size(390, 844)
        driver.execute_script("location.hash = '#/feed'")
        wait(driver, "return document.querySelectorAll('#main .msg').length > 3", "the feed on a phone")
        shoot(driver, out / "ui-phone.png")
        dark(driver, True)
        shoot(driver, out / "ui-phone-dark.png")
    finally:
        if driver is not None:
            stop_browser(driver)
        subprocess.run([THRUM, "daemon", "stop"], cwd=repo, env=e, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Helpers for the Web UI tests: a repository driven through the INSTALLED ``thrum``
CLI (its daemon started by the CLI, as a user's would be), raw HTTP against the UI's
listener, and headless Chromium (Debian's ``chromium`` + ``chromium-driver``)."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from fixtures.thrum_cli import run_thrum
from thrum.client import Client
from thrum.paths import resolve

CHROMIUM = os.environ.get("THRUM_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("THRUM_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parents[2]
ARTEFACTS = Path(os.environ.get("THRUM_ARTEFACTS", ROOT / "tmp" / "artefacts")) / "ui"
WAIT = 15.0  # upper bound for anything awaited in the browser (never a sleep)
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def env(**extra: str) -> dict:
    """The CLI's environment: any free ports, no timer syncs, none of the caller's identity."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("THRUM_")}
    e.update(
        {
            "THRUM_WS_PORT": "0",
            "THRUM_UI_PORT": "0",
            "THRUM_SYNC_INTERVAL": "3600",
            "THRUM_SYNC_DEBOUNCE": "3600",
            "COLUMNS": "120",
        }
    )
    e.update(extra)
    return e


class Repo:
    """A git checkout with thrum, driven through the installed CLI."""

    def __init__(self, path: Path, **env_extra: str):
        self.path = Path(path)
        self.env = env(**env_extra)
        self._client: Client | None = None

    def run(
        self,
        *args: str,
        agent: str | None = None,
        check: bool = True,
        extra_env: dict | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess:
        e = dict(self.env, **(extra_env or {}))
        if agent:
            e["THRUM_NAME"] = agent
        proc = run_thrum(args, cwd=self.path, env=e, timeout=timeout)  # in this process (fixtures/thrum_cli.py)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"thrum {' '.join(args)} -> {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def json(self, *args: str, agent: str | None = None):
        return json.loads(self.run(*args, "--json", agent=agent).stdout)

    def init(self) -> "Repo":
        self.run("init", "--non-interactive")
        return self

    def agent(self, name: str, role: str, module: str = "") -> str:
        args = ["quickstart", "--name", name, "--role", role, "--quiet"]
        if module:
            args += ["--module", module]
        self.run(*args)
        return name

    def send(self, agent: str, text: str, *args: str) -> str:
        return self.json("send", text, *args, agent=agent)["message_id"]

    def rpc(self, method: str, params: dict | None = None):
        if self._client is None:
            self._client = Client(resolve(self.path), timeout=60)
        return self._client.call(method, params or {})

    def ui(self, *args: str) -> dict:
        """``thrum ui --json``: {url, port, ws_port, expires_in}."""
        return self.json("ui", *args)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
        if (self.path / ".thrum").exists():
            self.run("daemon", "stop", check=False)


# ---------------------------------------------------------------------------- raw HTTP


@dataclass
class Reply:
    status: int
    headers: dict
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


def http_get(port: int, target: str, headers: dict | None = None, method: str = "GET") -> Reply:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request(method, target, headers=headers or {})
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def login(ui: dict) -> str:
    """Redeem a ``thrum ui`` URL over plain HTTP; returns the ``Cookie`` header value it sets."""
    url = urlsplit(ui["url"])
    reply = http_get(ui["port"], f"{url.path}?{url.query}", {"Host": url.netloc})
    assert reply.status == 303, reply
    return reply.header("set-cookie").split(";")[0]


def page_key(ui: dict) -> str:
    """The page key of a ``thrum ui`` URL (its fragment ``key=S.K``)."""
    fragment = urlsplit(ui["url"]).fragment
    assert fragment.startswith("key="), ui["url"]
    return fragment[len("key=") :]


# ---------------------------------------------------------------------------- the browser


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (None when they can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        return (
            f"headless Chromium not found ({', '.join(missing)}); install it with "
            "`apt-get install -y chromium chromium-driver` (Debian/Ubuntu) to run the browser tests"
        )
    return None


def start_browser(width: int = 1280, height: int = 860):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    profile = tempfile.mkdtemp(prefix="thrum-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver._thrum_profile = profile
    return driver


def stop_browser(driver) -> None:
    try:
        driver.quit()
    finally:
        shutil.rmtree(getattr(driver, "_thrum_profile", ""), ignore_errors=True)


TWO_AGENTS = (("alice", "implementer", "auth"), ("bob", "reviewer", "auth"))


def make_team(where: Path, *, remote: bool = True, agents=TWO_AGENTS, **env_extra: str) -> Repo:
    """A repository with thrum initialised and ``agents`` (name, role, module) registered:
    a clone of a bare remote (``remote``: the repo's ``.remote``), or a local-only one."""
    from fixtures.repos.builders import make_replicas, make_repo

    if remote:
        pair = make_replicas(where, 1)
        team = Repo(pair.a, **env_extra).init()
        team.remote = pair.remote
    else:
        make_repo(where / "repo")
        team = Repo(where / "repo", THRUM_LOCAL="1", **env_extra).init()
    for name, role, module in agents:
        team.agent(name, role, module)
    return team


def screenshot(driver, name: str) -> Path:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTEFACTS / f"{name}.png"
    driver.execute_script("document.getElementById('toasts')?.replaceChildren()")
    driver.save_screenshot(str(path))
    return path

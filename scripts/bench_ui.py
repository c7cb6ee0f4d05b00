#!/usr/bin/env python3
"""Web UI benchmarks (issue 16), in headless Chromium (Debian's chromium + chromium-driver).

Run through ``scripts/bench.py ui`` or directly with the venv's python::

    python scripts/bench_ui.py [--runs 3] [--messages 10000] [--samples 300] [--loads 5]

Each run makes a fresh repository (local only) with ``--messages`` messages over 20
agents (sent over the Unix socket by 8 concurrent clients), opens the UI in a fresh
browser profile and measures:

- first render of the feed: navigation start → the feed's first page (50 of the
  messages) is in the DOM and the next animation frame runs (``performance.now()``
  in the page; ``window.__thrum.firstFeedRender``). "cold" is the first visit of
  the profile (login redirect included, nothing cached); "warm" the median of
  ``--loads`` reloads (static files revalidated with ETags).
- send → on screen: a ``message.send`` over the Unix socket (the wall clock just
  before the request) → the message's element is in the feed and a frame has run
  (the page's wall clock, ``performance.timeOrigin + performance.now()``, corrected
  by the browser/Python clock offset measured at the start). Sends are sequential:
  each waits until its message is on screen.

Prints the median over the runs of each figure (and of each run's p50/p99).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "ui"))

from fixtures.repos.builders import make_repo  # noqa: E402
from thrum.client import Client  # noqa: E402
from thrum.paths import resolve  # noqa: E402
from ui_helpers import browser_missing, start_browser, stop_browser  # noqa: E402

TARGETS = {"first_render_ms": 500.0, "on_screen_p99_ms": 100.0}
THRUM = shutil.which("thrum") or str(Path(sys.executable).parent / "thrum")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1))))
    return ordered[k]


def _env() -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("THRUM_")}
    e.update({"THRUM_WS_PORT": "0", "THRUM_UI_PORT": "0", "THRUM_LOCAL": "1"})
    return e


def _thrum(repo: Path, *args: str) -> str:
    return subprocess.run([THRUM, *args], cwd=repo, env=_env(), check=True, capture_output=True, text=True).stdout


def populate(paths, n_messages: int, n_agents: int = 20, clients: int = 8) -> float:
    """Register agents and send ``n_messages`` (mentions, scopes, some replies); returns seconds."""
    roles = ["implementer", "reviewer", "tester", "planner"]
    with Client(paths) as c:
        for i in range(n_agents):
            c.call("agent.register", {"name": f"agent{i:02d}", "role": roles[i % len(roles)], "module": f"m{i % 5}"})
    started = time.monotonic()

    def worker(k: int) -> None:
        with Client(paths) as c:
            for j in range(k, n_messages, clients):
                params = {
                    "caller": f"agent{j % n_agents:02d}",
                    "content": f"Message {j}: progress on task {j % 97}, see the notes in the module docs.",
                    "to": [f"@{roles[j % len(roles)]}"] if j % 3 else [f"@agent{(j + 1) % n_agents:02d}"],
                }
                if j % 4 == 0:
                    params["scopes"] = [{"type": "module", "value": f"m{j % 5}"}]
                c.call("message.send", params)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - started


def wait_first_render(driver, timeout: float = 30.0) -> float:
    return driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1], until = Date.now() + arguments[0] * 1000;
        (function check() {
          const v = window.__thrum && window.__thrum.firstFeedRender;
          if (v !== null && v !== undefined) return done(v);
          if (Date.now() > until) return done(-1);
          requestAnimationFrame(check);
        })();""",
        timeout,
    )


def clock_offset_ms(driver, rounds: int = 20) -> float:
    """Browser wall clock minus Python's, from the round trip with the least delay."""
    best = None
    for _ in range(rounds):
        before = time.time() * 1000
        js = driver.execute_script("return performance.timeOrigin + performance.now()")
        after = time.time() * 1000
        if best is None or after - before < best[0]:
            best = (after - before, js - (before + after) / 2)
    return best[1]


def on_screen_at(driver, message_id: str, timeout: float = 10.0) -> float:
    return driver.execute_async_script(
        """
        const [id, secs] = arguments, done = arguments[arguments.length - 1], until = Date.now() + secs * 1000;
        (function check() {
          const t = window.__thrum.onScreen[id];
          if (t) return done(t);
          if (Date.now() > until) return done(-1);
          requestAnimationFrame(check);
        })();""",
        message_id,
        timeout,
    )


def one_run(args) -> dict:
    base = Path(tempfile.mkdtemp(prefix="thrum-bench-ui-"))
    repo = base / "repo"
    make_repo(repo)
    driver = None
    try:
        _thrum(repo, "init", "--non-interactive")
        paths = resolve(repo)
        fill_s = populate(paths, args.messages)
        url = Client(paths).call("ui.open", {"port": 0})["url"]
        driver = start_browser()
        driver.set_script_timeout(60)
        driver.get(url)  # login (303) → the feed
        cold = wait_first_render(driver)
        warm = []
        for _ in range(args.loads):
            driver.get(url.split("/login")[0] + "/")
            warm.append(wait_first_render(driver))
        offset = clock_offset_ms(driver)
        delays, replies = [], []
        with Client(paths) as c:
            for i in range(args.samples):
                t0 = time.time() * 1000
                mid = c.call(
                    "message.send", {"caller": "agent00", "content": f"latency probe {i}", "to": ["@reviewer"]}
                )["message_id"]
                replies.append(time.time() * 1000 - t0)
                shown = on_screen_at(driver, mid)
                if shown < 0:
                    raise RuntimeError(f"message {mid} never reached the screen")
                delays.append(max(0.0, shown - offset - t0))
        return {
            "fill_s": fill_s,
            "cold_ms": cold,
            "warm_ms": statistics.median(warm),
            "p50": percentile(delays, 50),
            "p99": percentile(delays, 99),
            "max": max(delays),
            "reply_p50": percentile(replies, 50),
        }
    finally:
        if driver is not None:
            stop_browser(driver)
        subprocess.run([THRUM, "daemon", "stop"], cwd=repo, env=_env(), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--messages", type=int, default=10_000)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--loads", type=int, default=5)
    args = p.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"ui: skipped: {missing}")
        return 0
    runs = []
    for i in range(args.runs):
        r = one_run(args)
        print(
            f"  run {i + 1}: filled {args.messages} messages in {r['fill_s']:.1f} s; first render cold "
            f"{r['cold_ms']:.0f} ms, warm {r['warm_ms']:.0f} ms; on screen p50 {r['p50']:.1f} ms, "
            f"p99 {r['p99']:.1f} ms, max {r['max']:.1f} ms",
            flush=True,
        )
        runs.append(r)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    rows = [
        (
            f"first render of the feed, {args.messages:,} messages, cold",
            f"{med['cold_ms']:.0f} ms",
            f"≤ {TARGETS['first_render_ms']:.0f} ms",
        ),
        (
            f"first render of the feed, warm (median of {args.loads} reloads)",
            f"{med['warm_ms']:.0f} ms",
            f"≤ {TARGETS['first_render_ms']:.0f} ms",
        ),
        (f"message.send → on screen p50 ({args.samples} sends)", f"{med['p50']:.1f} ms", ""),
        ("message.send → on screen p99", f"{med['p99']:.1f} ms", f"≤ {TARGETS['on_screen_p99_ms']:.0f} ms"),
        ("(of which the send's own reply, durable write included) p50", f"{med['reply_p50']:.1f} ms", ""),
    ]
    w1 = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    print(f"\nui (median of {len(runs)} runs)")
    print(f"  {'metric'.ljust(w1)}  {'value'.rjust(w2)}  target")
    for name, value, target in rows:
        print(f"  {name.ljust(w1)}  {value.rjust(w2)}  {target}")
    return 0


def section(args) -> None:
    main([])


if __name__ == "__main__":
    sys.exit(main())

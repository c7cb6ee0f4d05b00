#!/usr/bin/env python3
"""Web UI benchmarks (issues 16 and 27), in headless Chromium (Debian's chromium + chromium-driver).

Run through ``scripts/bench.py ui`` or directly with the venv's python::

    python scripts/bench_ui.py [--runs 3] [--messages 100000] [--samples 300] [--cli-samples 40]
                               [--loads 5] [--live 10000] [--scroll-step 4000]

One repository (local only) gets ``--messages`` messages over 20 agents (sent over
the Unix socket by 8 concurrent clients). Each run then opens the UI in a fresh
browser profile and measures:

- first render of the feed: navigation start → the feed's first page is in the
  DOM and the next animation frame runs (``performance.now()`` in the page;
  ``window.__thrum.firstFeedRender``). "cold" is the first visit of the profile
  (login redirect included, nothing cached); "warm" the median of ``--loads``
  reloads (static files revalidated with ETags).
- send → on screen: the wall clock just before a ``message.send`` over the Unix
  socket (or before a ``thrum send`` process is started: "CLI send") → the
  message's element is in the feed and a frame has run (the page's wall clock,
  ``performance.timeOrigin + performance.now()``, corrected by the browser/Python
  clock offset measured at the start). Sends are sequential: each waits until
  its message is on screen.
- scrolling: the feed is scrolled from the newest to the oldest of all the
  messages by ``--scroll-step`` px per animation frame (a fast fling, kept up all
  the way); frames per second = frames drawn / time taken, the 95th percentile
  frame interval, and the most elements and messages the list held in the DOM
  at any frame.

Then once, in a fresh page on the feed: ``--live`` messages arrive while it is
open (8 concurrent senders); once the last is on screen, the page's JavaScript
heap after a garbage collection (CDP ``Runtime.getHeapUsage``) and its DOM node
count (``Memory.getDOMCounters``).

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

TARGETS = {
    "cold_ms": 300.0,
    "warm_ms": 150.0,
    "on_screen_p99_ms": 100.0,
    "fps": 50.0,
    "heap_mib": 30.0,
}
THRUM = shutil.which("thrum") or str(Path(sys.executable).parent / "thrum")
ROLES = ["implementer", "reviewer", "tester", "planner"]


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


def register(paths, n_agents: int = 20) -> None:
    with Client(paths) as c:
        for i in range(n_agents):
            c.call("agent.register", {"name": f"agent{i:02d}", "role": ROLES[i % len(ROLES)], "module": f"m{i % 5}"})


def populate(paths, n_messages: int, n_agents: int = 20, clients: int = 8, tag: str = "") -> float:
    """Send ``n_messages`` (mentions, scopes, some Markdown); returns seconds."""
    started = time.monotonic()

    def worker(k: int) -> None:
        with Client(paths) as c:
            for j in range(k, n_messages, clients):
                params = {
                    "caller": f"agent{j % n_agents:02d}",
                    "content": f"{tag}Message {j}: progress on task {j % 97}, see the **notes** in `docs/m{j % 5}`.",
                    "to": [f"@{ROLES[j % len(ROLES)]}"] if j % 3 else [f"@agent{(j + 1) % n_agents:02d}"],
                }
                if j % 4 == 0:
                    params["scopes"] = [{"type": "module", "value": f"m{j % 5}"}]
                if j % 13 == 0:
                    params["subject"] = f"Status of task {j % 97}"
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


SCROLL = """
const [step, limit] = arguments, done = arguments[arguments.length - 1];
const main = document.getElementById('main');
main.scrollTop = 0;
const gaps = [];
let frames = 0, maxNodes = 0, maxRows = 0, last = null, t0 = null;
function frame(t) {
  if (t0 === null) t0 = t;
  if (last !== null) gaps.push(t - last);
  last = t;
  frames += 1;
  maxNodes = Math.max(maxNodes, main.getElementsByTagName('*').length);
  maxRows = Math.max(maxRows, main.querySelectorAll('.msg').length);
  const end = main.scrollTop + main.clientHeight >= main.scrollHeight - 1;
  if (end || t - t0 > limit * 1000) {
    const ids = [...main.querySelectorAll('.msg[data-id]')];
    return done({frames, ms: t - t0, gaps, maxNodes, maxRows, end, scrolled: main.scrollTop,
                 status: (document.querySelector('#main .list-status') || {}).textContent || ''});
  }
  main.scrollTop += step;
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
"""


def scroll_fps(driver, step: int, limit_s: float = 240.0) -> dict:
    driver.set_script_timeout(limit_s + 30)
    r = driver.execute_async_script(SCROLL, step, limit_s)
    gaps = r.pop("gaps")
    r["fps"] = (r["frames"] - 1) / (r["ms"] / 1000) if r["ms"] else 0.0
    r["p95_frame_ms"] = percentile(gaps, 95) if gaps else 0.0
    return r


def cli_send(repo: Path, i: int) -> tuple[float, str]:
    t0 = time.time() * 1000
    out = subprocess.run(
        [THRUM, "send", f"cli latency probe {i}", "--to", "@reviewer", "--json"],
        cwd=repo,
        env={**_env(), "THRUM_NAME": "agent01"},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    import json

    return t0, json.loads(out)["message_id"]


def one_run(args, repo: Path, paths) -> dict:
    driver = None
    try:
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
        delays, replies, cli = [], [], []
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
        for i in range(args.cli_samples):
            t0, mid = cli_send(repo, i)
            shown = on_screen_at(driver, mid)
            if shown < 0:
                raise RuntimeError(f"message {mid} never reached the screen")
            cli.append(max(0.0, shown - offset - t0))
        scroll = scroll_fps(driver, args.scroll_step)
        return {
            "cold_ms": cold,
            "warm_ms": statistics.median(warm),
            "p50": percentile(delays, 50),
            "p99": percentile(delays, 99),
            "max": max(delays),
            "reply_p50": percentile(replies, 50),
            "cli_p50": percentile(cli, 50) if cli else 0.0,
            "cli_p99": percentile(cli, 99) if cli else 0.0,
            "fps": scroll["fps"],
            "p95_frame_ms": scroll["p95_frame_ms"],
            "max_nodes": scroll["maxNodes"],
            "max_rows": scroll["maxRows"],
            "scroll_s": scroll["ms"] / 1000,
            "scroll_end": float(scroll["end"]),
        }
    finally:
        if driver is not None:
            stop_browser(driver)


def live_memory(args, paths) -> dict:
    """A page on the feed while ``--live`` messages arrive; its heap and DOM after they did."""
    driver = None
    try:
        url = Client(paths).call("ui.open", {"port": 0})["url"]
        driver = start_browser()
        driver.set_script_timeout(600)
        driver.get(url)
        wait_first_render(driver)
        secs = populate(paths, args.live, tag="live ")
        with Client(paths) as c:
            total = c.call("message.list", {"include_deleted": True, "include_archived": True, "page_size": 1})["total"]
        last = driver.execute_async_script(
            """
            const [want, done] = [arguments[0], arguments[arguments.length - 1]], until = Date.now() + 300000;
            (function check() {
              const c = document.querySelector('#main .count');
              if (c && c.textContent === want) return done(want);
              if (Date.now() > until) return done('timeout: ' + (c ? c.textContent : ''));
              requestAnimationFrame(check);
            })();""",
            f"{total:,} messages",
        )
        time.sleep(1.0)  # the last notifications drawn
        driver.execute_cdp_cmd("HeapProfiler.enable", {})
        driver.execute_cdp_cmd("HeapProfiler.collectGarbage", {})
        heap = driver.execute_cdp_cmd("Runtime.getHeapUsage", {})
        dom = driver.execute_cdp_cmd("Memory.getDOMCounters", {})
        elements = driver.execute_script("return document.getElementsByTagName('*').length")
        return {
            "send_s": secs,
            "heap_mib": heap["usedSize"] / 1048576,
            "heap_total_mib": heap["totalSize"] / 1048576,
            "dom_nodes": dom["nodes"],
            "elements": elements,
            "count": last,
        }
    finally:
        if driver is not None:
            stop_browser(driver)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--cli-samples", type=int, default=40)
    p.add_argument("--loads", type=int, default=5)
    p.add_argument("--live", type=int, default=10_000)
    p.add_argument("--scroll-step", type=int, default=4000, help="px per frame while scrolling")
    args = p.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"ui: skipped: {missing}")
        return 0
    base = Path(tempfile.mkdtemp(prefix="thrum-bench-ui-"))
    repo = base / "repo"
    make_repo(repo)
    runs = []
    try:
        _thrum(repo, "init", "--non-interactive")
        paths = resolve(repo)
        register(paths)
        fill_s = populate(paths, args.messages)
        print(f"  filled {args.messages:,} messages in {fill_s:.1f} s", flush=True)
        for i in range(args.runs):
            r = one_run(args, repo, paths)
            print(
                f"  run {i + 1}: first render cold {r['cold_ms']:.0f} ms, warm {r['warm_ms']:.0f} ms; "
                f"on screen p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms; CLI send on screen p50 "
                f"{r['cli_p50']:.0f} ms, p99 {r['cli_p99']:.0f} ms; scroll {r['fps']:.1f} fps "
                f"(p95 frame {r['p95_frame_ms']:.1f} ms, {r['scroll_s']:.0f} s, end reached: "
                f"{bool(r['scroll_end'])}), DOM at most {r['max_nodes']} elements / {r['max_rows']} messages",
                flush=True,
            )
            runs.append(r)
        mem = live_memory(args, paths)
        print(
            f"  live: {args.live:,} messages sent in {mem['send_s']:.1f} s while the feed was open ({mem['count']}); "
            f"heap {mem['heap_mib']:.1f} MiB used ({mem['heap_total_mib']:.1f} allocated), "
            f"{mem['dom_nodes']} DOM nodes, {mem['elements']} elements",
            flush=True,
        )
    finally:
        subprocess.run([THRUM, "daemon", "stop"], cwd=repo, env=_env(), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    rows = [
        (
            f"first render of the feed, {args.messages:,} messages, cold",
            f"{med['cold_ms']:.0f} ms",
            f"≤ {TARGETS['cold_ms']:.0f} ms",
        ),
        (
            f"first render of the feed, warm (median of {args.loads} reloads)",
            f"{med['warm_ms']:.0f} ms",
            f"≤ {TARGETS['warm_ms']:.0f} ms",
        ),
        (f"message.send → on screen p50 ({args.samples} sends)", f"{med['p50']:.1f} ms", ""),
        ("message.send → on screen p99", f"{med['p99']:.1f} ms", f"≤ {TARGETS['on_screen_p99_ms']:.0f} ms"),
        ("(of which the send's own reply, durable write included) p50", f"{med['reply_p50']:.1f} ms", ""),
        (f"`thrum send` process start → on screen p50 ({args.cli_samples} sends)", f"{med['cli_p50']:.0f} ms", ""),
        ("`thrum send` process start → on screen p99", f"{med['cli_p99']:.0f} ms", ""),
        (
            f"scrolling all {args.messages:,} messages ({args.scroll_step} px/frame)",
            f"{med['fps']:.1f} fps",
            f"≥ {TARGETS['fps']:.0f} fps",
        ),
        ("(95th percentile frame interval while scrolling)", f"{med['p95_frame_ms']:.1f} ms", ""),
        (
            "most elements / messages in the list's DOM while scrolling",
            f"{med['max_nodes']:.0f} / {med['max_rows']:.0f}",
            "bounded",
        ),
        (
            f"page JS heap after {args.live:,} live messages (after GC)",
            f"{mem['heap_mib']:.1f} MiB",
            f"≤ {TARGETS['heap_mib']:.0f} MB",
        ),
        ("(DOM nodes of the whole page then)", f"{mem['dom_nodes']}", ""),
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

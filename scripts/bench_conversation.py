#!/usr/bin/env python3
"""Conversations across machines (issue 30): send on A -> visible on B, and what an idle replica costs.

Usage:
    python scripts/bench_conversation.py [--rounds 20] [--idle-minutes 4] [--only local|http]

Two replicas, each a clone with its own daemon at the default pace (sync_interval,
sync_active_interval, sync_active_window, sync_debounce as shipped), reach one remote:
a local bare repository, then smart HTTP (git http-backend behind Basic auth on
loopback) with 100 ms added each way to every request.

1. Conversation: alice on A and bob on B take turns for ``--rounds`` rounds; each
   message is sent after a think time of 0.5-3 s (uniform) and timed from the send's
   answer to the moment the other daemon lists it (polled every 50 ms). Targets:
   p50 <= 3 s, p99 <= 6 s.
2. Idle: after the conversation, both daemons are left alone past the active window
   and its back-off, then the remote's requests are counted for ``--idle-minutes``
   (HTTP: the server's own count of requests; local: the daemons' tip checks) and
   given per replica per hour. Target: <= 150.

Over HTTP it also prints the requests per message during the conversation (both
replicas, looks included): round trips are what the latency multiplies.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pygit2  # noqa: E402

LATENCY_S = 0.100
ENV = {"THRUM_WS_PORT": "0", "THRUM_NO_AUTOSTART": "1"}
TOKEN_ENV = {"THRUM_GIT_TOKEN": "s3cret", "THRUM_GIT_USERNAME": "alice"}


def step(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def rpc(paths, method: str, params: dict | None = None, timeout: float = 120.0):
    from thrum import lifecycle

    return lifecycle.call(paths, method, params or {}, timeout=timeout)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def fleet(base: Path, url: str) -> list:
    from fixtures.repos.builders import clone, make_bare
    from thrum import lifecycle

    make_bare(base / "remote.git", with_commit=True)
    out = []
    for name, role in (("alice", "implementer"), ("bob", "reviewer")):
        dest = base / name
        clone(base / "remote.git", dest)
        pygit2.Repository(str(dest)).remotes.set_url("origin", url)
        paths = lifecycle.init_repo(dest, start_daemon=False)
        lifecycle.start(paths, timeout=120)
        rpc(paths, "agent.register", {"name": name, "role": role})
        out.append(paths)
    for _ in range(2):
        for paths in out:
            rpc(paths, "sync.run")
    return out


def visible(paths, caller: str, message_id: str, deadline_s: float = 60.0) -> float:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = rpc(paths, "message.list", {"caller": caller, "page_size": 5})["messages"]
        if any(m["message_id"] == message_id for m in got):
            return time.monotonic()
        time.sleep(0.05)
    raise RuntimeError(f"{message_id} not visible to {caller} within {deadline_s}s")


def conversation(a, b, rounds: int) -> list[float]:
    seen = []
    sides = [(a, "alice", b, "bob"), (b, "bob", a, "alice")]
    for i in range(rounds * 2):
        src, author, dst, reader = sides[i % 2]
        time.sleep(random.uniform(0.5, 3.0))
        t0 = time.monotonic()
        sent = rpc(src, "message.send", {"caller": author, "content": f"turn {i}", "mentions": [f"@{reader}"]})
        seen.append(visible(dst, reader, sent["message_id"]) - t0)
    return seen


def idle(pair, server, minutes: float, settle: float | None) -> float:
    """Requests per replica per hour while both replicas are idle."""
    if settle is None:  # the window, then the back-off (1+2+...+32 s) up to the idle interval
        settle = max(rpc(p, "sync.status")["pace"]["active_window_s"] for p in pair) + 70
    step(f"  idle: waiting {settle:.0f} s for the active window and its back-off to pass")
    time.sleep(settle)
    paces = [rpc(p, "sync.status")["pace"] for p in pair]
    step(f"  idle: counting from now; pace {[(x['state'], x['tip_checks']) for x in paces]}")
    before = sum(x["tip_checks"] for x in paces)
    if server is not None:
        server.reset_stats()
    start = time.monotonic()
    time.sleep(minutes * 60)
    hours = (time.monotonic() - start) / 3600
    paces = [rpc(p, "sync.status")["pace"] for p in pair]
    step(f"  idle: counted; pace {[(x['state'], x['tip_checks']) for x in paces]}")
    if server is not None:
        count = server.stats()["requests"]
    else:
        count = sum(rpc(p, "sync.status")["pace"]["tip_checks"] for p in pair) - before
    return count / len(pair) / hours


def run(transport: str, args, base: Path) -> list[str]:
    from fixtures.servers.githttp import GitHttpServer
    from thrum import lifecycle

    tbase = base / transport
    tbase.mkdir(parents=True)
    server = None
    if transport == "http":
        server = GitHttpServer(tbase, users={"alice": "s3cret"}).start()
        server.latency_s = LATENCY_S
        url = server.url("remote.git")
    else:
        url = str(tbase / "remote.git")
    pair = []
    try:
        step(f"{transport}: two replicas")
        pair = fleet(tbase, url)
        step(f"{transport}: conversation, {args.rounds} rounds")
        if server is not None:
            server.reset_stats()
        seen = conversation(*pair, args.rounds)
        talk = server.stats() if server is not None else None
        per_hour = idle(pair, server, args.idle_minutes, args.settle)
    finally:
        for p in pair:
            lifecycle.stop(p)
        if server is not None:
            server.stop()
    label = "local bare remote" if transport == "local" else f"smart HTTP, +{LATENCY_S * 1000:.0f} ms each way"
    unit = "HTTP requests" if transport == "http" else "tip checks (no network)"
    rows = [
        f"  {label}: send on A -> visible on B, {len(seen)} messages: p50 {statistics.median(seen):.2f} s "
        f"(target <= 3), p99 {pct(seen, 0.99):.2f} s (target <= 6), max {max(seen):.2f} s",
        f"  {label}: idle {unit} per replica per hour: {per_hour:.0f} (target <= 150)",
    ]
    if talk is not None:  # both replicas' requests while they talked, looks included
        rows.insert(
            1,
            f"  {label}: during the conversation, HTTP requests per message {talk['requests'] / len(seen):.1f} "
            f"(of them 401 challenges {talk['unauthorized'] / len(seen):.1f}, uploads/downloads "
            f"{talk['posts'] / len(seen):.1f})",
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--idle-minutes", type=float, default=4.0)
    p.add_argument("--only", choices=("local", "http"))
    p.add_argument("--settle", type=float, help="seconds to wait before counting idle requests (default: computed)")
    args = p.parse_args(argv)
    import os

    os.environ.update(ENV)
    os.environ.update(TOKEN_ENV)
    for key in ("THRUM_SYNC_INTERVAL", "THRUM_SYNC_DEBOUNCE", "THRUM_SYNC_ACTIVE_INTERVAL", "THRUM_SYNC_ACTIVE_WINDOW"):
        os.environ.pop(key, None)  # the shipped pace
    for key in ("THRUM_NAME", "THRUM_ROLE", "THRUM_MODULE", "THRUM_LOCAL"):
        os.environ.pop(key, None)
    rows = []
    with tempfile.TemporaryDirectory(prefix="thrum-conv-") as tmp:
        (Path(tmp) / "home").mkdir()
        os.environ["HOME"] = str(Path(tmp) / "home")  # no git config or credential helper of the user's
        for transport in ("local", "http"):
            if args.only in (None, transport):
                rows += run(transport, args, Path(tmp))
    print("\n== conversation across machines (issue 30) ==")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Real-time benchmarks (issue 5): notification latency, fan-out, message.wait wake-up.

Run through ``scripts/bench.py realtime`` or directly with the venv's python::

    python scripts/bench_realtime.py [--runs 3] [--samples 300] [--fanout 100]

Each run starts a fresh daemon (local only) and measures, with the third-party
``websockets`` client for subscribers and a plain Unix-socket client for the
sender (all in one asyncio loop, so both sides read the same clock):

- latency: ``message.send`` reply received → one subscriber receives the
  ``message.create`` notification (sends are sequential; each waits for its
  notification, so no queueing). Negative values (the notification overtook the
  reply) count as 0.
- fan-out: the same with ``--fanout`` subscribers; every subscriber's latency
  for every send is a sample.
- wait wake-up: a ``message.wait`` is pending on another connection; from
  sending the ``message.send`` request to the wait's reply (the send's own round
  trip, durable write included, is printed next to it: the difference is the
  wake-up).

Prints a table of the medians over the runs of each run's p50/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from websockets.asyncio.client import connect  # noqa: E402

from fixtures.repos.builders import make_repo  # noqa: E402
from thrum import lifecycle  # noqa: E402
from bench_table import print_table  # noqa: E402

TARGETS = {"latency_p50": 2.0, "latency_p99": 10.0, "fanout_p99": 50.0}


# ---------------------------------------------------------------------------- clients


class UnixRpc:
    """Sequential JSON-RPC over the daemon's Unix socket (asyncio)."""

    def __init__(self, reader, writer):
        self.reader, self.writer, self.n = reader, writer, 0

    @classmethod
    async def open(cls, paths) -> "UnixRpc":
        reader, writer = await asyncio.open_unix_connection(str(paths.socket), limit=64 * 1024 * 1024)
        return cls(reader, writer)

    async def call(self, method: str, params: dict | None = None):
        self.n += 1
        rid = self.n
        self.writer.write(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}).encode() + b"\n"
        )
        await self.writer.drain()
        while True:
            reply = json.loads(await self.reader.readline())
            if reply.get("id") == rid:
                break
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


class Subscriber:
    """A `websockets` client that timestamps every message.create notification it receives."""

    def __init__(self, ws):
        self.ws = ws
        self.arrivals: dict[str, float] = {}
        self.waiters: dict[str, asyncio.Future] = {}
        self.task = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, paths, scope: dict) -> "Subscriber":
        port = paths.ws_port_file.read_text().strip()
        token = paths.ws_token_file.read_text().strip()
        ws = await connect(
            f"ws://127.0.0.1:{port}/ws", additional_headers={"Authorization": f"Bearer {token}"}, max_queue=None
        )
        await ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "subscribe.create",
                    "params": {"filter_type": "scope", "scope": scope},
                }
            )
        )
        reply = json.loads(await ws.recv())
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return cls(ws)

    async def _read(self) -> None:
        async for raw in self.ws:
            now = time.perf_counter()
            msg = json.loads(raw)
            if msg.get("method") == "message.create":
                mid = msg["params"]["message_id"]
                self.arrivals[mid] = now
                fut = self.waiters.pop(mid, None)
                if fut is not None and not fut.done():
                    fut.set_result(now)

    async def arrival(self, mid: str) -> float:
        if mid in self.arrivals:
            return self.arrivals[mid]
        fut = self.waiters.setdefault(mid, asyncio.get_running_loop().create_future())
        return await asyncio.wait_for(fut, 30)

    async def close(self) -> None:
        await self.ws.close()
        self.task.cancel()


# ---------------------------------------------------------------------------- measurements


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))]


async def measure_latency(paths, samples: int, n_subs: int, tag: str) -> list[float]:
    scope = {"type": "bench", "value": tag}
    subs = [await Subscriber.open(paths, scope) for _ in range(n_subs)]
    sender = await UnixRpc.open(paths)
    lat: list[float] = []
    try:
        for i in range(samples + 5):
            res = await sender.call("message.send", {"caller": "bsender", "content": f"{tag} {i}", "scopes": [scope]})
            t_reply = time.perf_counter()
            arrivals = await asyncio.gather(*[s.arrival(res["message_id"]) for s in subs])
            if i >= 5:  # warm-up
                lat.extend(max(0.0, (t - t_reply) * 1000) for t in arrivals)
    finally:
        await sender.close()
        for s in subs:
            await s.close()
    return lat


async def measure_wait(paths, samples: int) -> tuple[list[float], list[float]]:
    """(send request -> wait reply, send request -> send reply) in ms."""
    sender = await UnixRpc.open(paths)
    waiter = await UnixRpc.open(paths)
    lat: list[float] = []
    rtt: list[float] = []
    try:
        for i in range(samples + 3):
            pending = asyncio.create_task(waiter.call("message.wait", {"caller": "bwaiter", "timeout": 30}))
            await asyncio.sleep(0.005)  # let the wait reach the daemon and block (a benchmark, not a test)
            t_request = time.perf_counter()
            await sender.call("message.send", {"caller": "bsender", "content": f"wake {i}", "to": ["bwaiter"]})
            t_reply = time.perf_counter()
            result = await pending
            t_woke = time.perf_counter()
            if result["timed_out"]:
                raise RuntimeError("message.wait timed out")
            await sender.call(
                "message.markRead", {"caller": "bwaiter", "message_ids": [m["message_id"] for m in result["messages"]]}
            )
            if i >= 3:
                lat.append((t_woke - t_request) * 1000)
                rtt.append((t_reply - t_request) * 1000)
    finally:
        await sender.close()
        await waiter.close()
    return lat, rtt


def one_run(tmp: Path, r: int, samples: int, fanout: int, fanout_samples: int) -> dict:
    repo = tmp / f"rt-{r}"
    make_repo(repo)
    os.environ.update({"THRUM_LOCAL": "1", "THRUM_WS_PORT": "0"})
    paths = lifecycle.init_repo(repo)
    try:
        lifecycle.call(paths, "agent.register", {"name": "bsender", "role": "bench"})
        lifecycle.call(paths, "agent.register", {"name": "bwaiter", "role": "benchwait"})

        async def go():
            one = await measure_latency(paths, samples, 1, f"one{r}")
            many = await measure_latency(paths, fanout_samples, fanout, f"fan{r}")
            woke, rtt = await measure_wait(paths, max(50, samples // 3))
            return one, many, woke, rtt

        one, many, woke, rtt = asyncio.run(go())
    finally:
        lifecycle.stop(paths)
    return {
        "latency_p50": pct(one, 50),
        "latency_p99": pct(one, 99),
        "fanout_p50": pct(many, 50),
        "fanout_p99": pct(many, 99),
        "wait_p50": pct(woke, 50),
        "wait_p99": pct(woke, 99),
        "send_rtt_p50": pct(rtt, 50),
    }


def run(runs: int = 3, samples: int = 300, fanout: int = 100, fanout_samples: int = 50) -> dict:
    """Medians over ``runs`` fresh daemons of each run's percentiles (milliseconds)."""
    tmp = Path(tempfile.mkdtemp(prefix="thrum-bench-rt-"))
    try:
        results = [one_run(tmp, r, samples, fanout, fanout_samples) for r in range(runs)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {k: statistics.median(res[k] for res in results) for k in results[0]} | {"runs": results}


def table(result: dict, fanout: int) -> list[tuple[str, str, str]]:
    return [
        ("send reply -> notification, 1 subscriber (p50)", f"{result['latency_p50']:.2f} ms", "<= 2 ms"),
        ("send reply -> notification, 1 subscriber (p99)", f"{result['latency_p99']:.2f} ms", "<= 10 ms"),
        (f"fan-out to {fanout} subscribers (p50)", f"{result['fanout_p50']:.2f} ms", ""),
        (f"fan-out to {fanout} subscribers (p99)", f"{result['fanout_p99']:.2f} ms", "<= 50 ms"),
        ("message.wait reply after send request (p50)", f"{result['wait_p50']:.2f} ms", ""),
        ("message.wait reply after send request (p99)", f"{result['wait_p99']:.2f} ms", ""),
        ("  for comparison: message.send round trip (p50)", f"{result['send_rtt_p50']:.2f} ms", ""),
    ]


def section(args) -> dict:
    """Entry point for scripts/bench.py (uses --rt-runs/--rt-samples/--rt-fanout when defined)."""
    runs = getattr(args, "rt_runs", 3)
    fanout = getattr(args, "rt_fanout", 100)
    result = run(runs=runs, samples=getattr(args, "rt_samples", 300), fanout=fanout)
    rows = table(result, fanout)
    title = f"\nrealtime (median of {runs} runs, fresh daemon each)"
    print_table(rows, title=title, head=("metric", "value"), indent="  ")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", dest="rt_runs", type=int, default=3)
    ap.add_argument("--samples", dest="rt_samples", type=int, default=300, help="sends for the 1-subscriber latency")
    ap.add_argument("--fanout", dest="rt_fanout", type=int, default=100, help="subscribers for the fan-out")
    ap.add_argument("--json", action="store_true", help="also print the per-run figures as JSON")
    args = ap.parse_args(argv)
    result = section(args)
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""MCP server benchmarks (issue 10): tool round trips through the official client.

Run through ``scripts/bench.py mcp`` or directly with the venv's python::

    python scripts/bench_mcp.py [--runs 3] [--samples 300] [--inbox 10000]

Each run starts a fresh daemon (local only) and ``thrum mcp serve`` processes
driven by the official SDK client (``stdio_client`` + ``ClientSession``, on asyncio:
the SDK's default; the server itself runs on trio),
and measures:

- start-up: spawning ``thrum mcp serve`` until ``initialize`` has completed
  (identity, daemon health check, subscription, SDK import included);
- ``send_message``: the tool's round trip (durable send + recipient status), and
  ``list_groups`` (one read RPC, no disk write) to show what the MCP layer itself costs;
- ``check_messages`` (default limit 50) on an inbox of ``--inbox`` unread
  messages; each call consumes 50, so the inbox shrinks by 50 per sample;
- ``wait_for_message`` wake-up: a wait is blocked in the server; from the
  ``message.send`` reply (another client, over the Unix socket) to the wait's
  result at the MCP client, and from the send request;
- for comparison, the plain ``message.send`` round trip over the socket.

Prints a table of the medians over the runs of each run's p50/p99.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from fixtures.repos.builders import make_repo  # noqa: E402
from thrum import client_async, identity  # noqa: E402
from thrum import lifecycle  # noqa: E402
from bench_table import print_table  # noqa: E402

THRUM = shutil.which("thrum") or str(Path(sys.executable).parent / "thrum")
TARGETS = {"send_p50": 5.0, "wake_p99": 50.0, "startup": 1000.0}


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))]


def _server(repo: Path, agent: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=THRUM, args=["mcp", "serve", "--repo", str(repo), "--agent-id", agent], cwd=str(repo)
    )


async def _tool(session: ClientSession, name: str, args: dict) -> dict:
    result = await session.call_tool(name, args)
    if result.is_error:
        raise RuntimeError(f"{name}: {result.content[0].text}")
    return result.structured_content


async def measure_startup(repo: Path, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        async with stdio_client(_server(repo, "bsender")) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                out.append((time.perf_counter() - t0) * 1000)
    return out


async def measure_send(repo: Path, samples: int) -> tuple[list[float], list[float]]:
    """(send_message round trips, list_groups round trips: one read RPC, no disk write) in ms."""
    lat, reads = [], []
    async with stdio_client(_server(repo, "bsender")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for i in range(samples + 10):
                t0 = time.perf_counter()
                await _tool(session, "send_message", {"to": "@bwaiter", "content": f"bench {i}"})
                t1 = time.perf_counter()
                await _tool(session, "list_groups", {})
                if i >= 10:  # warm-up
                    lat.append((t1 - t0) * 1000)
                    reads.append((time.perf_counter() - t1) * 1000)
    return lat, reads


def sdk_import_ms(n: int = 5) -> float:
    """Median wall time of a fresh Python importing the MCP SDK's server (the bulk of start-up)."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import mcp.server"], check=True)
        out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(out)


async def fill_inbox(paths, n: int) -> None:
    async with client_async.open_client(paths) as client:

        async def sender(start: int) -> None:
            for i in range(start, n, 8):
                await client.call("message.send", {"caller": "bsender", "content": f"inbox {i}", "to": ["binbox"]})

        async with anyio.create_task_group() as nursery:
            for k in range(8):
                nursery.start_soon(sender, k)


async def measure_check(repo: Path, samples: int) -> list[float]:
    lat = []
    async with stdio_client(_server(repo, "binbox")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(samples):
                t0 = time.perf_counter()
                got = await _tool(session, "check_messages", {})
                lat.append((time.perf_counter() - t0) * 1000)
                if len(got["messages"]) != 50:
                    raise RuntimeError(f"check_messages returned {len(got['messages'])} messages")
    return lat


async def measure_wake(paths, repo: Path, samples: int) -> tuple[list[float], list[float], list[float]]:
    """(send reply -> wait result, send request -> wait result, send round trip) in ms."""
    after_reply, after_request, rtt = [], [], []
    async with client_async.open_client(paths) as sender:
        async with stdio_client(_server(repo, "bwaiter")) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await _tool(session, "check_messages", {"limit": 1000})  # drain what the send bench left
                for i in range(samples + 5):
                    box: dict = {}

                    async def wait(box=box):
                        box["r"] = await _tool(session, "wait_for_message", {"timeout": 30})
                        box["t"] = time.perf_counter()

                    async with anyio.create_task_group() as nursery:
                        nursery.start_soon(wait)
                        await anyio.sleep(0.01)  # let the wait block in the server (a benchmark, not a test)
                        t_request = time.perf_counter()
                        await sender.call(
                            "message.send", {"caller": "bsender", "content": f"wake {i}", "to": ["bwaiter"]}
                        )
                        t_reply = time.perf_counter()
                    if box["r"]["status"] != "message_received":
                        raise RuntimeError("wait_for_message timed out")
                    if i >= 5:
                        after_reply.append(max(0.0, (box["t"] - t_reply) * 1000))
                        after_request.append((box["t"] - t_request) * 1000)
                        rtt.append((t_reply - t_request) * 1000)
    return after_reply, after_request, rtt


def one_run(tmp: Path, r: int, samples: int, inbox: int, startups: int) -> dict:
    repo = tmp / f"mcp-{r}"
    make_repo(repo)
    os.environ.update({"THRUM_LOCAL": "1", "THRUM_WS_PORT": "0"})
    paths = lifecycle.init_repo(repo)
    try:
        for name, role in (("bsender", "bench"), ("bwaiter", "benchwait"), ("binbox", "benchbox")):
            lifecycle.call(paths, "agent.register", {"name": name, "role": role})
            identity.write(paths.identities, identity.Identity(name=name, role=role))

        async def go():
            start = await measure_startup(repo, startups)
            send, reads = await measure_send(repo, samples)
            woke, from_request, rtt = await measure_wake(paths, repo, max(50, samples // 3))
            t0 = time.perf_counter()
            await fill_inbox(paths, inbox)
            fill_s = time.perf_counter() - t0
            check = await measure_check(repo, max(1, min(20, inbox // 50)))
            return start, send, reads, woke, from_request, rtt, check, fill_s

        sdk = sdk_import_ms()  # just before the start-ups, so both see the same machine
        start, send, reads, woke, from_request, rtt, check, fill_s = anyio.run(go, backend="asyncio")
    finally:
        lifecycle.stop(paths)
    return {
        "startup": statistics.median(start),
        "startup_max": max(start),
        "sdk_import": sdk,
        "send_p50": pct(send, 50),
        "send_p99": pct(send, 99),
        "read_p50": pct(reads, 50),
        "read_p99": pct(reads, 99),
        "check_p50": pct(check, 50),
        "check_p99": pct(check, 99),
        "wake_p50": pct(woke, 50),
        "wake_p99": pct(woke, 99),
        "wake_req_p50": pct(from_request, 50),
        "wake_req_p99": pct(from_request, 99),
        "send_rtt_p50": pct(rtt, 50),
        "inbox_fill_s": fill_s,
    }


def run(runs: int = 3, samples: int = 300, inbox: int = 10_000, startups: int = 5) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="thrum-bench-mcp-"))
    try:
        results = [one_run(tmp, r, samples, inbox, startups) for r in range(runs)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {k: statistics.median(res[k] for res in results) for k in results[0]} | {"runs": results}


def table(result: dict, inbox: int) -> list[tuple[str, str, str]]:
    return [
        ("start-up: spawn -> initialize done (median)", f"{result['startup']:.0f} ms", "<= 1000 ms"),
        ("  of which: a fresh python importing mcp.server", f"{result['sdk_import']:.0f} ms", ""),
        ("send_message round trip (p50)", f"{result['send_p50']:.2f} ms", "<= 5 ms"),
        ("send_message round trip (p99)", f"{result['send_p99']:.2f} ms", ""),
        (
            "  for comparison: list_groups round trip, one read (p50 / p99)",
            f"{result['read_p50']:.2f} / {result['read_p99']:.2f} ms",
            "",
        ),
        (f"check_messages, inbox of {inbox:,} (p50)", f"{result['check_p50']:.2f} ms", ""),
        (f"check_messages, inbox of {inbox:,} (p99)", f"{result['check_p99']:.2f} ms", ""),
        ("wait_for_message result after send reply (p50)", f"{result['wake_p50']:.2f} ms", ""),
        ("wait_for_message result after send reply (p99)", f"{result['wake_p99']:.2f} ms", "<= 50 ms"),
        (
            "  same, from the send request (p50 / p99)",
            f"{result['wake_req_p50']:.2f} / {result['wake_req_p99']:.2f} ms",
            "",
        ),
        ("  for comparison: message.send round trip (p50)", f"{result['send_rtt_p50']:.2f} ms", ""),
    ]


def section(args) -> dict:
    """Entry point for scripts/bench.py."""
    runs = getattr(args, "mcp_runs", 3)
    inbox = getattr(args, "mcp_inbox", 10_000)
    result = run(runs=runs, samples=getattr(args, "mcp_samples", 300), inbox=inbox)
    rows = table(result, inbox)
    title = f"\nmcp (median of {runs} runs, fresh daemon each; official MCP client over stdio)"
    print_table(rows, title=title, head=("metric", "value"), indent="  ")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", dest="mcp_runs", type=int, default=3)
    ap.add_argument("--samples", dest="mcp_samples", type=int, default=300, help="send_message calls per run")
    ap.add_argument("--inbox", dest="mcp_inbox", type=int, default=10_000, help="unread messages for check_messages")
    ap.add_argument("--json", action="store_true", help="also print the per-run figures as JSON")
    args = ap.parse_args(argv)
    result = section(args)
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

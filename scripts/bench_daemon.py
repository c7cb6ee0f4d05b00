"""Daemon benchmarks (issue 3): durable sends over the socket, list latency, CLI start-up.

Run through `scripts/bench.py daemon` or directly with the venv's python.
Prints a table; every figure is the median of --runs runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_segments import SegmentWriter, Signing  # noqa: E402
from fixtures.repos.builders import make_repo  # noqa: E402
from thrum import events as ev  # noqa: E402
from thrum import lifecycle  # noqa: E402
from bench_table import print_table  # noqa: E402


class Conn:
    def __init__(self, paths):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(str(paths.socket))
        self.f = self.s.makefile("rb")
        self.n = 0

    def call(self, method, params):
        self.n += 1
        self.s.sendall(
            json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode() + b"\n"
        )
        reply = json.loads(self.f.readline())
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]

    def close(self):
        self.f.close()
        self.s.close()


def fresh_daemon(tmp: Path, name: str, env_extra=None):
    repo = tmp / name
    make_repo(repo)
    os.environ.update({"THRUM_LOCAL": "1", "THRUM_WS_PORT": "0", **(env_extra or {})})
    return lifecycle.init_repo(repo)


def _client_proc(socket_path, i, per_client, start, done):
    """One benchmark client in its own process (threads would share the bench's GIL)."""
    from types import SimpleNamespace

    conn = Conn(SimpleNamespace(socket=socket_path))
    start.wait()
    for n in range(per_client):
        conn.call("message.send", {"caller": f"bench{i}", "content": f"message {n}", "to": ["@worker"]})
    conn.close()
    done.put(i)


CPU_PER_MSG: list[float] = []  # the daemon's CPU ms per message of each send run


def _cpu(pid) -> float:
    """CPU seconds (user + system) of a process so far: what the machine's load changes least."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_send(paths, clients: int, per_client: int) -> float:
    import multiprocessing as mp

    c = Conn(paths)
    for i in range(clients):
        c.call("agent.register", {"name": f"bench{i}", "role": "worker"})
        c.call("message.send", {"caller": f"bench{i}", "content": "warm-up"})
    c.close()
    ctx = mp.get_context("fork")
    start, done = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_client_proc, args=(str(paths.socket), i, per_client, start, done)) for i in range(clients)
    ]
    for p in procs:
        p.start()
    pid = lifecycle.read_pid(paths)
    cpu0 = _cpu(pid)
    t0 = time.perf_counter()
    start.set()
    for _ in procs:
        done.get()
    elapsed = time.perf_counter() - t0
    CPU_PER_MSG.append((_cpu(pid) - cpu0) / (clients * per_client) * 1000)
    for p in procs:
        p.join()
    return clients * per_client / elapsed


def seed_messages(paths, count: int) -> None:
    """Write `count` signed message.create events straight into shards (sealed, as the
    daemon writes them; the seed agents are identities of this repository), then let
    the daemon catch up."""
    lifecycle.stop(paths)
    wt = paths.main_repo / ".git" / "thrum-sync" / "a-sync"
    agents = [f"seed{i}" for i in range(20)]
    roles = ["implementer", "reviewer", "tester", "planner"]
    signing = Signing(paths.identities)
    lifecycle_lines = []
    ses = {}
    for i, a in enumerate(agents):
        lifecycle_lines.append(ev.encode_line(signing.agent(a, roles[i % 4])))
        start = ev.SessionStart(agent_id=a)
        ses[a] = start.session_id
        lifecycle_lines.append(ev.encode_line(signing.sign(start.to_dict())))
    segments = SegmentWriter(wt, signing=signing)
    segments.append("events", lifecycle_lines)
    for n in range(count):
        a = agents[n % len(agents)]
        eid = ev.new_ulid()
        line = {
            "type": "message.create",
            "timestamp": ev.now_rfc3339(),
            "event_id": eid,
            "v": 1,
            "message_id": signing.message_id(a),
            "thread_id": f"thr_{eid}",
            "agent_id": a,
            "session_id": ses[a],
            "body": {"format": "markdown", "content": f"seeded message {n}", "structured": ""},
            "scopes": [{"type": "module", "value": f"m{n % 7}"}],
            "refs": [{"type": "mention", "value": roles[n % 4]}],
            "priority": "normal",
            "authored_by": "",
            "disclosed": False,
        }
        segments.append(f"messages/{a}", [ev.encode_line(signing.sign(line))], signer=a)
    segments.close()
    lifecycle.start(paths)


def bench_list(paths, runs: int = 300) -> tuple[float, float]:
    c = Conn(paths)
    lat = []
    for i in range(runs):
        agent = f"seed{i % 20}"
        t0 = time.perf_counter()
        c.call("message.list", {"caller": agent, "page_size": 50, "page": 1 + i % 3})
        lat.append((time.perf_counter() - t0) * 1000)
    c.close()
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1]


def bench_cli(paths, runs: int = 15) -> tuple[float, float]:
    env = dict(os.environ, THRUM_NAME="bench0")
    ident = paths.identities / "bench0.json"
    ident.write_text(json.dumps({"name": "bench0", "role": "worker", "module": ""}))
    thrum = shutil.which("thrum") or str(Path(sys.executable).parent / "thrum")

    def timed(cmd):
        out = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=paths.main_repo, env=env, check=True, capture_output=True)
            out.append((time.perf_counter() - t0) * 1000)
        return statistics.median(out)

    # Byte-compile first: this environment may set PYTHONDONTWRITEBYTECODE, and an
    # installed thrum always has its .pyc files.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "thrum")], check=True)
    timed([thrum, "send", "warm-up"])
    return timed([thrum, "send", "cli bench"]), timed([sys.executable, "-c", "import click"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sends", type=int, default=3000, help="messages per 1-client run")
    ap.add_argument("--seed", type=int, default=100_000, help="messages for the list benchmark")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="thrum-bench-"))
    rows = []
    try:
        one, eight = [], []
        for r in range(args.runs):
            p = fresh_daemon(tmp, f"send1-{r}")
            one.append(bench_send(p, 1, args.sends))
            lifecycle.stop(p)
            p = fresh_daemon(tmp, f"send8-{r}")
            eight.append(bench_send(p, 8, args.sends // 4))
            lifecycle.stop(p)
        rows.append(("message.send durable, 1 client", f"{statistics.median(one):,.0f} msg/s", ">= 2,000 msg/s"))
        rows.append(("message.send durable, 8 clients", f"{statistics.median(eight):,.0f} msg/s", ">= 4,000 msg/s"))
        rows.append(("  daemon CPU per message, 1 client", f"{statistics.median(CPU_PER_MSG[0::2]):.3f} ms", ""))
        rows.append(("  daemon CPU per message, 8 clients", f"{statistics.median(CPU_PER_MSG[1::2]):.3f} ms", ""))
        p = fresh_daemon(tmp, "list")
        seed_messages(p, args.seed)
        p50s, p99s = [], []
        for _ in range(args.runs):
            a, b = bench_list(p)
            p50s.append(a)
            p99s.append(b)
        rows.append(
            (f"message.list page of 50 on {args.seed:,} msgs (p50)", f"{statistics.median(p50s):.2f} ms", "<= 5 ms")
        )
        rows.append((f"message.list page of 50 on {args.seed:,} msgs (p99)", f"{statistics.median(p99s):.2f} ms", ""))
        cli, click_ms = bench_cli(p)
        rows.append(("thrum send wall time (median)", f"{cli:.1f} ms", "<= import click + 30 ms"))
        rows.append(("python -c 'import click' (median)", f"{click_ms:.1f} ms", f"difference {cli - click_ms:+.1f} ms"))
        lifecycle.stop(p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""thrum sync through real remotes: many replicas racing, and what a sync costs on the wire.

Usage:
    python scripts/bench_remotes.py [--replicas 12] [--rounds 20] [--runs 20] [--only race|wire]

1. Race (``race``): N replicas (default 12), each a clone with its own daemon, sync at
   once for R rounds (default 20) through a local bare remote, then through smart HTTP
   (git http-backend behind Basic auth on loopback). Each round every replica sends
   one message, then all run ``sync.run`` concurrently. Reported: failed syncs (target
   0), the time of a round (all syncs of the round done), the most push attempts one
   sync needed, and whether every replica ends with byte-identical shards and all
   N x R messages.
2. Wire (``wire``): two replicas over smart HTTP and over SSH (OpenSSH's sshd on
   loopback, behind a counting TCP proxy). A no-op sync and a 10-event sync (sender
   and receiver), median of ``--runs`` (default 20), with the requests (HTTP) or
   connections (SSH) and the bytes each sends and receives. Targets: a no-op sync is
   one ref advertisement per direction at most, with no pack negotiation; a 10-event
   sync moves at most 2x the packed size of its new objects.

Each daemon runs with THRUM_WS_PORT=0, THRUM_SYNC_INTERVAL=3600 and
THRUM_SYNC_DEBOUNCE=3600 so only the measured syncs run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pygit2  # noqa: E402

ENV = {"THRUM_WS_PORT": "0", "THRUM_SYNC_INTERVAL": "3600", "THRUM_SYNC_DEBOUNCE": "3600", "THRUM_NO_AUTOSTART": "1"}
TOKEN_ENV = {"THRUM_GIT_TOKEN": "s3cret", "THRUM_GIT_USERNAME": "alice"}


def step(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def rpc(paths, method: str, params: dict | None = None, timeout: float = 120.0):
    from thrum import lifecycle as launcher

    return launcher.call(paths, method, params or {}, timeout=timeout)


class Fleet:
    """Clones of ``base/remote.git`` reached at ``url``, each with its own daemon."""

    def __init__(self, base: Path, url: str, n: int):
        from fixtures.repos.builders import clone, make_bare
        from thrum import lifecycle as launcher

        self.base, self.url = base, url
        self.remote = base / "remote.git"
        make_bare(self.remote, with_commit=True)
        self.paths = []
        for i in range(n):
            dest = base / f"r{i:02d}"
            clone(self.remote, dest)
            pygit2.Repository(str(dest)).remotes.set_url("origin", url)
            p = launcher.init_repo(dest, start_daemon=False)
            launcher.start(p, timeout=120)
            self.paths.append(p)
            rpc(p, "agent.register", {"name": f"agent{i:02d}", "role": "worker"})
        for _ in range(2):  # everyone knows everyone's agent
            for p in self.paths:
                rpc(p, "sync.run")

    def worktree(self, i: int) -> Path:
        from thrum.sync.worktree import sync_worktree_path

        return sync_worktree_path(self.paths[i].main_repo)

    def shards(self, i: int) -> dict[str, bytes]:
        wt = self.worktree(i)
        return {q.relative_to(wt).as_posix(): q.read_bytes() for q in sorted(wt.rglob("*.jsonl"))}

    def stop(self) -> None:
        from thrum import lifecycle as launcher

        for p in self.paths:
            try:
                launcher.stop(p)
            except Exception as exc:  # noqa: BLE001
                print(f"could not stop a daemon: {exc}", file=sys.stderr)


# --------------------------------------------------------------------------- 1. race


def race(fleet: Fleet, rounds: int, server=None) -> dict:
    n = len(fleet.paths)
    failures: list[str] = []
    round_times, attempts = [], []
    if server is not None:
        server.reset_stats()
    for r in range(rounds):
        for i, p in enumerate(fleet.paths):
            rpc(p, "message.send", {"caller": f"agent{i:02d}", "content": f"round {r} from {i}", "to": ["@everyone"]})
        results: list = [None] * n

        def one(i: int, results: list = results) -> None:
            try:
                results[i] = rpc(fleet.paths[i], "sync.run", timeout=600)
            except Exception as exc:  # noqa: BLE001 - a failed sync is what we count
                results[i] = exc

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        round_times.append(time.perf_counter() - t)
        for i, res in enumerate(results):
            if isinstance(res, Exception) or not res.get("ok") or not res.get("pushed"):
                failures.append(f"round {r} replica {i}: {res}")
            else:
                attempts.append(res["attempts"])
    requests = server.stats()["requests"] if server is not None else None
    for _ in range(2):  # settle: each replica fetches what the last pushes brought
        for p in fleet.paths:
            rpc(p, "sync.run")
    shards = [fleet.shards(i) for i in range(n)]
    totals = [rpc(p, "message.list", {"page_size": 1})["total"] for p in fleet.paths]
    return {
        "failures": failures,
        "round_times": round_times,
        "max_attempts": max(attempts or [0]),
        "identical": all(s == shards[0] for s in shards[1:]),
        "messages": totals,
        "expected": n * rounds,
        "requests": requests,
    }


def run_race(args, base: Path) -> list[str]:
    from fixtures.servers.githttp import GitHttpServer

    out = []
    for transport in ("local", "http"):
        tbase = base / f"race-{transport}"
        tbase.mkdir(parents=True)
        server = None
        if transport == "http":
            server = GitHttpServer(tbase, users={"alice": "s3cret"}).start()
            url = server.url("remote.git")
        else:
            url = str(tbase / "remote.git")
        step(f"race over {transport}: starting {args.replicas} replicas")
        fleet = Fleet(tbase, url, args.replicas)
        try:
            step(f"race over {transport}: {args.rounds} rounds")
            res = race(fleet, args.rounds, server)
        finally:
            fleet.stop()
            if server is not None:
                server.stop()
        rt = res["round_times"]
        ok_msgs = all(t == res["expected"] for t in res["messages"])
        out.append(
            f"  {transport:6} {args.replicas} x {args.rounds}: failed syncs {len(res['failures'])} "
            f"(target 0); round median {statistics.median(rt):.2f} s, max {max(rt):.2f} s; "
            f"most attempts in one sync {res['max_attempts']}; identical trees {res['identical']}; "
            f"all {res['expected']} messages everywhere {ok_msgs}"
            + (f"; {res['requests'] / args.rounds:.0f} HTTP requests per round" if res["requests"] else "")
        )
        for f in res["failures"][:5]:
            out.append(f"         {f}")
        step(out[-1 - min(5, len(res["failures"]))].strip())
    return out


# --------------------------------------------------------------------------- 2. wire


def packed_size(repo_path: Path, old: pygit2.Oid, new: pygit2.Oid) -> int:
    """Bytes of a pack holding exactly the objects ``new`` adds over ``old``."""
    repo = pygit2.Repository(str(repo_path))

    def reachable(tree_id) -> set:
        seen, todo = set(), [tree_id]
        while todo:
            oid = todo.pop()
            if oid in seen:
                continue
            seen.add(oid)
            obj = repo[oid]
            if isinstance(obj, pygit2.Tree):
                todo.extend(e.id for e in obj)
        return seen

    walker = repo.walk(new)
    walker.hide(old)
    commits = [c.id for c in walker]
    objects = reachable(repo[new].tree_id) - reachable(repo[old].tree_id)
    pb = pygit2.PackBuilder(repo)
    for oid in [*commits, *objects]:
        pb.add(oid)
    with tempfile.TemporaryDirectory() as d:
        pb.write(d)
        return sum(p.stat().st_size for p in Path(d).glob("*.pack"))


def tip(paths) -> pygit2.Oid:
    return pygit2.Repository(str(paths.main_repo)).references["refs/heads/a-sync"].target


def wire(fleet: Fleet, counters, runs: int) -> list[tuple]:
    """(name, times, counts, packed) rows for no-op and 10-event syncs."""
    a, b = fleet.paths[0], fleet.paths[1]
    rows = []
    times, counts = [], []
    for _ in range(runs):
        counters.reset()
        t = time.perf_counter()
        rep = rpc(b, "sync.run")
        times.append(time.perf_counter() - t)
        assert rep["ok"] and rep["sent"] == rep["received"] == rep["commits"] == 0, rep
        counts.append(counters.stats())
    rows.append(("no-op sync", times, counts, None))
    send_t, send_c, recv_t, recv_c, packed = [], [], [], [], []
    rpc(a, "message.send", {"caller": "agent00", "content": "warm-up", "to": ["@agent01"]})  # + its session
    rpc(a, "sync.run")
    rpc(b, "sync.run")
    for r in range(runs):
        before = tip(a)
        for i in range(10):
            rpc(a, "message.send", {"caller": "agent00", "content": f"wire run {r} message {i}", "to": ["@agent01"]})
        counters.reset()
        t = time.perf_counter()
        rep = rpc(a, "sync.run")
        send_t.append(time.perf_counter() - t)
        assert rep["pushed"] and rep["sent"] >= 10, rep  # + a seal line (docs/design/trust.md)
        send_c.append(counters.stats())
        packed.append(packed_size(a.main_repo, before, tip(a)))
        counters.reset()
        t = time.perf_counter()
        rep = rpc(b, "sync.run")
        recv_t.append(time.perf_counter() - t)
        assert rep["received"] >= 10, rep
        recv_c.append(counters.stats())
    rows.append(("10-event sync, sender", send_t, send_c, packed))
    rows.append(("10-event sync, receiver", recv_t, recv_c, packed))
    return rows


class _HttpCounters:
    def __init__(self, server):
        self.server = server

    def reset(self):
        self.server.reset_stats()

    def stats(self) -> dict:
        s = self.server.stats()
        return {
            "requests": s["requests"],
            "up": s["bytes_in"],
            "down": s["bytes_out"],
            "posts": s["posts"],
            "pack_up": s["post_bytes_in"],
            "pack_down": s["post_bytes_out"],
        }


class _SshCounters:
    def __init__(self, proxy):
        self.proxy = proxy

    def reset(self):
        self.proxy.reset()

    def stats(self) -> dict:
        s = self.proxy.stats()
        return {"requests": s["connections"], "up": s["bytes_up"], "down": s["bytes_down"], "posts": None}


def run_wire(args, base: Path) -> list[str]:
    from fixtures.servers.githttp import GitHttpServer
    from fixtures.servers.sshd import SshClient, SshServer, sshd_path
    from fixtures.servers.tcp import CountingProxy

    out = []
    saved_home, saved_homedir = os.environ.get("HOME"), pygit2.settings.homedir
    for transport in ("http", "ssh"):
        tbase = base / f"wire-{transport}"
        tbase.mkdir(parents=True)
        stop = []
        if transport == "http":
            server = GitHttpServer(tbase, users={"alice": "s3cret"}).start()
            stop.append(server.stop)
            url, counters = server.url("remote.git"), _HttpCounters(server)
        else:
            if sshd_path() is None:
                out.append("  ssh: skipped (OpenSSH's sshd is not installed)")
                continue
            sshd = SshServer(tbase / "sshd").start()
            stop.append(sshd.stop)
            proxy = CountingProxy(sshd.port).start()
            stop.append(proxy.stop)
            client = SshClient(tbase / "home", sshd).authorize()
            client.trust_host(f"[127.0.0.1]:{proxy.port} {sshd.host_public_key()}")
            os.environ["HOME"] = str(client.home)  # the daemons (and this process) use its ~/.ssh
            os.environ.pop("SSH_AUTH_SOCK", None)
            pygit2.settings.homedir = str(client.home)
            url = f"ssh://{sshd.user}@127.0.0.1:{proxy.port}{(tbase / 'remote.git').resolve()}"
            counters = _SshCounters(proxy)
        step(f"wire over {transport}: 2 replicas")
        fleet = Fleet(tbase, url, 2)
        try:
            step(f"wire over {transport}: {args.runs} runs each")
            rows = wire(fleet, counters, args.runs)
        finally:
            fleet.stop()
            for fn in stop:
                fn()
            if saved_home is not None:
                os.environ["HOME"] = saved_home
            pygit2.settings.homedir = saved_homedir
        unit = "requests" if transport == "http" else "connections"
        for name, times, counts, packed in rows:

            def med(key: str, counts: list = counts) -> float:
                return statistics.median(c[key] for c in counts)

            line = (
                f"  {transport:4} {name:26} {statistics.median(times) * 1000:6.0f} ms (min "
                f"{min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); {med('requests'):.0f} {unit}, "
                f"sent {med('up'):,.0f} B, received {med('down'):,.0f} B"
            )
            if transport == "http":
                line += f", pack POSTs {med('posts'):.0f}"
            if packed:
                wire_bytes = med("up") if "sender" in name else med("down")
                p = statistics.median(packed)
                line += f"; new objects packed {p:,.0f} B, all bytes / packed {wire_bytes / p:.2f} (target <= 2)"
                if transport == "http":
                    pack_bytes = med("pack_up") if "sender" in name else med("pack_down")
                    line += f", pack exchange (POST, with headers) / packed {pack_bytes / p:.2f}"
            out.append(line)
            step(line.strip())
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=12)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--runs", type=int, default=20, help="runs per no-op / 10-event measure")
    p.add_argument("--only", choices=("race", "wire"))
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)
    for k in ("THRUM_NAME", "THRUM_ROLE", "THRUM_MODULE", "THRUM_LOCAL"):
        os.environ.pop(k, None)
    os.environ.update(ENV)
    os.environ.update(TOKEN_ENV)
    base = Path(tempfile.mkdtemp(prefix="thrum-bench-remotes-"))
    home = base / "home"
    home.mkdir()
    os.environ["HOME"] = str(home)  # no git config or credential helper of the machine's user
    lines = []
    try:
        if args.only in (None, "race"):
            lines += ["race: replicas syncing at once (each round: every replica sends 1, then all sync)"]
            lines += run_race(args, base)
        if args.only in (None, "wire"):
            lines += [f"wire: medians of {args.runs}"]
            lines += run_wire(args, base)
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(f"\nremotes benchmark; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""thrum storage benchmark: what the a-sync branch costs over many syncs (issue 11).

Usage:
    python scripts/bench_storage.py [--rounds N] [--events-per-round E] [--agents A] [--keep]

Two replicas (A and B, clones of one bare remote on local disk, each with its own
daemon; no background sync: interval and debounce 3600 s), 10 agents (half on each
machine). Each round one machine (A and B in turn) sends E messages (default 10)
through its daemon (`message.send` over the Unix socket, real time, real ids),
then runs `sync.run` (sends the E events), then the other machine runs `sync.run`
(receives them). The daemons consolidate their object stores and the remote's in
their own threads after each sync, as in normal use.

Reported (table): the raw JSONL bytes of the log at the end; the size of A's and
B's object stores and of the remote's against it; the bytes a round adds to each
store (median over the first and the last 10 % of the rounds, measured every
round); the sender's and the receiver's `sync.run` time at the start and at the end
(medians over the same windows); files and packs at the end; what each store's bytes
are once consolidation is quiet (objects stored whole and as deltas, by type, from `git
verify-pack`; indexes): where a store's size goes. Target: every store <= 0.7x the raw
JSONL, at the last round and settled (issue 28), and the last syncs within 1.5x of the first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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

import pygit2  # noqa: E402

from thrum import lifecycle  # noqa: E402
from thrum.sync.worktree import sync_worktree_path  # noqa: E402

TARGET = 0.7  # every store against the raw JSONL (issue 28)
ENV = {"THRUM_WS_PORT": "0", "THRUM_SYNC_INTERVAL": "3600", "THRUM_SYNC_DEBOUNCE": "3600", "THRUM_NO_AUTOSTART": "1"}
SIG = pygit2.Signature("bench", "bench@example.invalid", 1700000000, 0)
TEXT = (
    "Deployed the fix for the flaky auth test; the review queue is clear, next I look at "
    "the schema migration and the release notes."
)


class Conn:
    """One JSON-RPC connection to a daemon's Unix socket."""

    def __init__(self, paths):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(str(paths.socket))
        self.f = self.s.makefile("rb")
        self.n = 0

    def call(self, method: str, params: dict):
        self.n += 1
        self.s.sendall(
            json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode() + b"\n"
        )
        reply = json.loads(self.f.readline())
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]

    def close(self) -> None:
        self.f.close()
        self.s.close()


def du(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:  # a consolidation removed it meanwhile
                continue
    return total


def step(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(args) -> dict:
    for k in ("THRUM_NAME", "THRUM_ROLE", "THRUM_MODULE", "THRUM_LOCAL"):
        os.environ.pop(k, None)
    os.environ.update(ENV)
    base = Path(tempfile.mkdtemp(prefix="thrum-bench-storage-"))
    remote = base / "remote.git"
    bare = pygit2.init_repository(str(remote), bare=True, initial_head="main")
    tb = bare.TreeBuilder()
    tb.insert("README.md", bare.create_blob(b"# bench\n"), pygit2.enums.FileMode.BLOB)
    bare.create_commit("refs/heads/main", SIG, SIG, "init\n", tb.write(), [])
    started = []
    try:
        machines = []
        for name in ("a", "b"):
            pygit2.clone_repository(str(remote), str(base / name))
            paths = lifecycle.init_repo(base / name, start_daemon=False)
            lifecycle.start(paths)
            started.append(paths)
            machines.append((name, paths, Conn(paths)))
        agents = {name: [f"{name}_agent{i}" for i in range(args.agents // 2)] for name, _, _ in machines}
        for name, _, conn in machines:
            for i, agent in enumerate(agents[name]):
                conn.call("agent.register", {"name": agent, "role": f"role{i % 3}", "module": "core"})
        for _, _, conn in machines * 2:
            conn.call("sync.run", {})
        stores = {
            "A": base / "a" / ".git" / "objects",
            "B": base / "b" / ".git" / "objects",
            "remote": remote / "objects",
        }
        sizes = {k: [] for k in stores}
        send_t, recv_t = [], []
        # what ran beside each sync: "" (nothing), "roll-up" or "full" (a full repack; it wins
        # over a roll-up), a child of either daemon seen before or after the sync
        send_beside: list[str] = []
        recv_beside: list[str] = []
        send_cpu, recv_cpu = [], []  # the syncing daemon's own CPU (user + system) for each sync
        pids = [p.recorded_pid() for _, p, _ in machines]
        anon: list[float] = []  # both daemons' own memory (RssAnon, MiB), every round
        phases: dict[str, list[dict]] = {"sender": [], "receiver": []}  # the daemon's own split of each sync
        everyone = agents["a"] + agents["b"]
        t0 = time.perf_counter()
        for r in range(args.rounds):
            (sname, _, sender), (_, _, receiver) = machines if r % 2 == 0 else machines[::-1]
            for k in range(args.events_per_round):
                author = agents[sname][k % len(agents[sname])]
                sender.call(
                    "message.send",
                    {
                        "caller": author,
                        "content": f"{TEXT} (round {r}, {k})",
                        "to": [f"@{everyone[(r + k) % len(everyone)]}"],
                    },
                )
            spid, rpid = pids if r % 2 == 0 else pids[::-1]
            busy = consolidating(pids)
            c, t = _cpu_s(spid, children=False), time.perf_counter()
            rep = sender.call("sync.run", {})
            send_t.append(time.perf_counter() - t)
            send_cpu.append(_cpu_s(spid, children=False) - c)
            send_beside.append(_beside(busy | consolidating(pids)))
            assert rep["pushed"], rep
            phases["sender"].append(rep.get("phases_ms") or {})
            busy = consolidating(pids)
            c, t = _cpu_s(rpid, children=False), time.perf_counter()
            rep = receiver.call("sync.run", {})
            recv_t.append(time.perf_counter() - t)
            recv_cpu.append(_cpu_s(rpid, children=False) - c)
            recv_beside.append(_beside(busy | consolidating(pids)))
            assert rep["received"] >= args.events_per_round, rep
            phases["receiver"].append(rep.get("phases_ms") or {})
            anon.append(max(_anon_mib(p.recorded_pid()) for _, p, _ in machines))
            for k, path in stores.items():
                sizes[k].append(du(path))
            if (r + 1) % max(1, args.rounds // 20) == 0:
                step(
                    f"round {r + 1:,}/{args.rounds:,} ({time.perf_counter() - t0:.0f}s); "
                    + ", ".join(f"{k} {v[-1] / 2**20:.1f} MiB" for k, v in sizes.items())
                )
        # The stores as the last rounds left them may be caught in the middle of a roll-up
        # or a full repack (packs piling up meanwhile): read them again once it is done.
        t_quiet = time.perf_counter()
        quiet = wait_quiet(pids)
        settled = {k: du(path) for k, path in stores.items()}
        settled_packs = {k: len(list((p / "pack").glob("*.pack"))) for k, p in stores.items()}
        step(f"consolidation {'quiet' if quiet else 'still running'} after {time.perf_counter() - t_quiet:.0f}s more")
        wt = sync_worktree_path(base / "a")
        raw = sum(p.stat().st_size for p in wt.rglob("*.jsonl"))
        files = sum(1 for _ in wt.rglob("*.jsonl"))
        packs = {k: len(list((p / "pack").glob("*.pack"))) for k, p in stores.items()}
        made_of = {k: composition(p) for k, p in stores.items()}
        w = max(10, args.rounds // 10)

        def growth(series: list[int], lo: int, hi: int) -> float:
            steps = [series[i] - series[i - 1] for i in range(max(1, lo), hi)]
            return statistics.median(steps) if steps else float("nan")

        def mean_growth(series: list[int], lo: int, hi: int) -> float:
            lo = max(1, lo)
            return (series[hi - 1] - series[lo - 1]) / (hi - lo)

        return {
            "rounds": args.rounds,
            "events": args.rounds * args.events_per_round,
            "raw": raw,
            "files": files,
            "sizes": {k: v[-1] for k, v in sizes.items()},
            "packs": packs,
            "settled": settled,
            "settled_packs": settled_packs,
            "made_of": made_of,
            "growth_start": {k: mean_growth(v, 1, w) for k, v in sizes.items()},
            "growth_end": {k: mean_growth(v, args.rounds - w, args.rounds) for k, v in sizes.items()},
            "median_step_start": {k: growth(v, 1, w) for k, v in sizes.items()},
            "median_step_end": {k: growth(v, args.rounds - w, args.rounds) for k, v in sizes.items()},
            "send_start": statistics.median(send_t[:w]),
            "send_end": statistics.median(send_t[-w:]),
            "recv_start": statistics.median(recv_t[:w]),
            "recv_end": statistics.median(recv_t[-w:]),
            "seconds": time.perf_counter() - t0,
            # the same medians over the syncs with nothing, a roll-up or a full repack beside them (share of the window)
            "beside": {
                who: {
                    kind: {
                        edge: _beside_median(series, flags, kind, edge, w) for edge in ("start", "end", "second half")
                    }
                    for kind in ("", "roll-up", "full")
                }
                for who, series, flags in (("sender", send_t, send_beside), ("receiver", recv_t, recv_beside))
            },
            # the syncing daemon's own CPU per sync (mean: /proc counts it in 10 ms ticks): the
            # sync's work, whatever runs beside it
            "sync_cpu": {
                who: (statistics.fmean(series[:w]), statistics.fmean(series[-w:]))
                for who, series in (("sender", send_cpu), ("receiver", recv_cpu))
            },
            "repacks": _repacks_logged([p.log_file for _, p, _ in machines]),
            # CPU seconds of the daemons' children (git's repacks) and of the daemons themselves
            "repack_cpu": sum(_cpu_s(p.recorded_pid(), children=True) for _, p, _ in machines),
            "daemon_cpu": sum(_cpu_s(p.recorded_pid(), children=False) for _, p, _ in machines),
            "anon_start": statistics.median(anon[:w]),
            "anon_end": statistics.median(anon[-w:]),
            "anon_max": max(anon),
            # median of each quarter of the rounds: does it level off or keep climbing?
            "anon_quarters": [statistics.median(q) for q in _quarters(anon)],
            "phases": {
                who: {
                    "start": _phase_medians(series[:w]),
                    "end": _phase_medians(series[-w:]),
                }
                for who, series in phases.items()
            },
        }
    finally:
        for paths in started:
            try:
                lifecycle.stop(paths)
            except Exception as exc:  # noqa: BLE001
                print(f"could not stop a daemon: {exc}", file=sys.stderr)
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def composition(objects: Path) -> dict[str, int]:
    """What a store's bytes are (settled): objects stored whole and as deltas by type (their
    bytes in the packs, from `git verify-pack -v`), the packs' indexes, anything else."""
    out: dict[str, int] = {}
    for idx in sorted((objects / "pack").glob("*.idx")):
        listing = subprocess.run(["git", "verify-pack", "-v", str(idx)], capture_output=True, text=True).stdout
        for line in listing.splitlines():
            f = line.split()
            if len(f) >= 5 and f[1] in ("blob", "tree", "commit", "tag"):
                key = f"{f[1]} {'delta' if len(f) >= 7 else 'whole'}"
                out[key] = out.get(key, 0) + int(f[3])
        out["idx"] = out.get("idx", 0) + idx.stat().st_size
    out["other"] = du(objects) - sum(out.values())  # pack headers, loose objects, temporary files, bitmaps
    return out


def wait_quiet(pids: list[int | None], timeout: float = 900.0, quiet_s: float = 3.0) -> bool:
    """Until no daemon has had a child (a repack) for ``quiet_s`` seconds; False on timeout."""
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        if consolidating(pids):
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return True
        time.sleep(0.2)
    return False


def consolidating(pids: list[int | None]) -> set[str]:
    """The daemons' child processes now (their consolidation: git's repacks, `maintenance`),
    by kind: "full" (``git repack -a``) or "roll-up"; empty when there is none."""
    kinds = set()
    for pid in pids:
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    for child in f.read().split():
                        kinds.add(_kind(child))
        except OSError:
            continue
    return kinds


def _kind(pid: str) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "roll-up"  # gone meanwhile
    return "full" if b"-a" in argv else "roll-up"


def _beside(kinds: set[str]) -> str:
    return "full" if "full" in kinds else "roll-up" if kinds else ""


def _beside_median(series: list[float], flags: list[str], kind: str, edge: str, w: int) -> tuple[float, float]:
    window = {"start": slice(None, w), "end": slice(-w, None)}.get(edge, slice(len(series) // 2, None))
    picked = [t for t, k in zip(series[window], flags[window]) if k == kind]
    return (statistics.median(picked) if picked else float("nan"), len(picked) / max(1, len(series[window])))


_REPACKED = re.compile(r"repacked .* \((full|roll-up)\) in ([\d.]+) s, ([\d.]+) s of CPU")


def _repacks_logged(logs: list[Path]) -> dict[str, tuple[int, float, float]]:
    """Per kind, from the daemons' logs: how many repacks, their wall and CPU seconds."""
    out: dict[str, tuple[int, float, float]] = {}
    for path in logs:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for m in _REPACKED.finditer(text):
            n, wall, cpu = out.get(m.group(1), (0, 0.0, 0.0))
            out[m.group(1)] = (n + 1, wall + float(m.group(2)), cpu + float(m.group(3)))
    return out


LEVEL_SHARE = 0.25  # the last quarter's growth against the first's, at most, for "levels off"
LEVEL_NOISE_MIB = 2.0  # a step this small is flat whatever the first was (RssAnon's medians wander ~1 MiB)


def levels_off(quarters: list[float]) -> str:
    """Whether the daemons' memory levels off, from the medians of the four quarters of the
    rounds: the step from the third to the fourth against the step from the first to the
    second (the replay ring and the bounded caches fill early, then hold)."""
    first, last = quarters[1] - quarters[0], quarters[3] - quarters[2]
    flat = last <= LEVEL_NOISE_MIB or (first > 0 and last <= LEVEL_SHARE * first)
    share = f" ({last / first:.0%} of it)" if first > 0 else ""
    return (
        f"{'levels off' if flat else 'STILL GROWING'}: last quarter {last:+.1f} MiB against the first's "
        f"{first:+.1f} MiB{share} (levels off: <= {LEVEL_SHARE:.0%} of it or <= {LEVEL_NOISE_MIB:.0f} MiB)"
    )


def _quarters(series: list[float]) -> list[list[float]]:
    n = len(series)
    return [series[i * n // 4 : max((i + 1) * n // 4, i * n // 4 + 1)] for i in range(4)]


def _cpu_s(pid: int | None, *, children: bool) -> float:
    """CPU seconds (user + system) of a daemon, or of its children it waited for (git's repacks)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # fields[0] is the state (field 3): utime, stime are fields 14, 15; cutime, cstime 16, 17
    ticks = int(fields[13]) + int(fields[14]) if children else int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _anon_mib(pid: int | None) -> float:
    """A daemon's own memory (RssAnon, MiB): what it allocated, not the files it maps."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return float("nan")


def _phase_medians(window: list[dict]) -> dict[str, float]:
    names = sorted({k for rep in window for k in rep})
    return {k: statistics.median(rep.get(k, 0.0) for rep in window) for k in names}


def print_table(res: dict) -> None:
    raw = res["raw"]
    print(
        f"\nstorage benchmark: {res['rounds']:,} rounds x {res['events'] // res['rounds']} events "
        f"({res['events']:,} events, {res['seconds']:.0f}s); load average {os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} CPUs"
    )
    print(f"  raw JSONL at the end: {raw / 2**20:.2f} MiB in {res['files']:,} files")
    print(
        f"  {'store':8} {'size':>10} {'x raw':>7} {'packs':>6} {'B/round start':>14} {'B/round end':>12}"
        f"  (median step start / end)  {'settled':>10} {'x raw':>6} {'packs':>5}"
    )
    for k in ("A", "B", "remote"):
        size, settled = res["sizes"][k], res["settled"][k]
        print(
            f"  {k:8} {size / 2**20:8.2f}MiB {size / raw:7.2f} {res['packs'][k]:6d} "
            f"{res['growth_start'][k]:14,.0f} {res['growth_end'][k]:12,.0f}"
            f"  ({res['median_step_start'][k]:,.0f} / {res['median_step_end'][k]:,.0f})"
            f"  {settled / 2**20:8.2f}MiB {settled / raw:6.2f} {res['settled_packs'][k]:5d}"
        )
    for k in ("A", "B", "remote"):
        parts = res["made_of"][k]
        print(f"    {k:6} made of (MiB): " + ", ".join(f"{name} {n / 2**20:.2f}" for name, n in sorted(parts.items())))
    print(
        f"  10-event sync, sender:   start {res['send_start'] * 1000:6.1f} ms, end {res['send_end'] * 1000:6.1f} ms "
        f"(x{res['send_end'] / res['send_start']:.2f})"
    )
    print(
        f"  10-event sync, receiver: start {res['recv_start'] * 1000:6.1f} ms, end {res['recv_end'] * 1000:6.1f} ms "
        f"(x{res['recv_end'] / res['recv_start']:.2f})"
    )
    for who in ("sender", "receiver"):
        for kind, label in (("", "no consolidation"), ("roll-up", "a roll-up"), ("full", "a full repack")):
            (a0, f0), (a1, f1), (ah, fh) = (res["beside"][who][kind][e] for e in ("start", "end", "second half"))
            print(
                f"    {who}, syncs with {label} beside them: start {a0 * 1000:.1f} ms ({f0:.0%} of them), "
                f"end {a1 * 1000:.1f} ms ({f1:.0%}) (x{a1 / a0:.2f}); second half of the rounds "
                f"{ah * 1000:.1f} ms ({fh:.0%})"
            )
    for who in ("sender", "receiver"):
        c0, c1 = res["sync_cpu"][who]
        print(
            f"    {who}, the syncing daemon's own CPU per sync (mean): start {c0 * 1000:.1f} ms, "
            f"end {c1 * 1000:.1f} ms (x{c1 / c0:.2f})"
        )
    for who in ("sender", "receiver"):
        ph = res["phases"][who]
        print(
            f"    {who} phases (median ms, start -> end): "
            + ", ".join(f"{k} {ph['start'].get(k, 0):.1f} -> {ph['end'].get(k, 0):.1f}" for k in ph["end"])
        )
    print(
        f"  daemon memory (RssAnon, the larger of the two), first / last 10 % of rounds (median), max: "
        f"{res['anon_start']:.0f} / {res['anon_end']:.0f} / {res['anon_max']:.0f} MiB; "
        f"by quarter of the rounds: {' / '.join(f'{q:.0f}' for q in res['anon_quarters'])} MiB"
    )
    print(f"    {levels_off(res['anon_quarters'])}")
    print(
        f"  CPU, both daemons: consolidation (git repack, their children) {res['repack_cpu']:.1f} s "
        f"({res['repack_cpu'] / res['rounds'] * 1000:.1f} ms a round); the daemons themselves {res['daemon_cpu']:.1f} s"
    )
    for kind, (n, wall, cpu) in sorted(res["repacks"].items()):
        print(
            f"    {kind} repacks (daemon logs): {n}, {wall:.1f} s wall, {cpu:.1f} s CPU "
            f"({cpu / res['rounds'] * 1000:.1f} ms a round, {cpu / max(1, n):.2f} s each)"
        )
    ok = (
        all(max(res["sizes"][k], res["settled"][k]) <= TARGET * raw for k in res["sizes"])
        and res["send_end"] <= 1.5 * res["send_start"]
        and res["recv_end"] <= 1.5 * res["recv_start"]
    )
    print(
        f"  targets (every store <= {TARGET}x raw, at the last round and settled; last sync within 1.5x of the first): "
        f"{'met' if ok else 'MISSED'}"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5000, help="sync rounds")
    p.add_argument("--events-per-round", type=int, default=10, help="messages sent per round")
    p.add_argument("--agents", type=int, default=10, help="agents (half on each machine)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (repos, daemon logs)")
    args = p.parse_args(argv)
    res = run(args)
    print_table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())

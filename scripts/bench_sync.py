#!/usr/bin/env python3
"""thrum sync benchmark: two machines, one bare remote, a large history.

Usage:
    python scripts/bench_sync.py [--events N] [--runs R] [--keep] [--base DIR]

What it does (everything on local disk, each clone with its own daemon started with
THRUM_WS_PORT=0, THRUM_SYNC_INTERVAL=3600, THRUM_SYNC_DEBOUNCE=3600 so no background
sync interferes):

1. A bare remote and clone A. The history (N message.create events, default
   1,000,000, over 50 agents, plus their agent.register / agent.session.start in
   the events stream) is written as JSONL lines straight into A's a-sync worktree,
   in the log's segments (`bench_segments`): valid
   events with ULID event ids, msg_/thr_/ses_ ids, a markdown body and a mention ref.
2. A's daemon starts (it folds the history), then `sync.run` on A commits and pushes it.
3. Clone B of the remote, `init_repo` (attaches to a-sync; its daemon folds the history).
4. The daemons consolidate their object stores (and the remote's) with git's geometric
   repack once enough small packs wait, in the background; the benchmark waits until
   no daemon has run one for a few seconds.
5. Measured, each as the `sync.run` RPC round trip (commit + fetch + merge + fold +
   push), median of R runs:
   - no-op sync on B and on A;
   - 10 events: A's agent sends 10 messages (RPC message.send, one sender per run),
     `sync.run` on A (send side), then `sync.run` on B (receive side, fold included);
   - 10,000 events received by B in one sync. A's daemon is stopped and 10,000 valid
     message.create lines are appended to A's worktree files (the way the daemon's
     appender writes them); A then runs one offline cycle (what `thrum sync` does
     with the daemon stopped: commit + push), and B's `sync.run` is timed. Two
     shapes: "new streams" (10 new agents x 1,000 events, agent.register lines in
     the events stream: what a new machine joining brings) and "all streams" (200
     events appended to each of the 50 existing history streams).

Prints a table (name, median, min, max, target, and the CPU the syncing daemon spent per
sync: all its threads, from its process CPU clock, read before the ``sync.run`` call and
`SETTLE_S` after its answer, so the tidy-up a cycle asks for counts too; wall figures on
a busy machine are noise, CPU per sync is what compares), then the median of each phase
the cycle reported (``phases_ms``: fetch, merge, fold, commit, push). The daemon logs
are in .thrum/var/daemon.log of each clone when --keep is given.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
import pygit2  # noqa: E402

from bench_segments import SegmentWriter, Signing  # noqa: E402
from bench_storage import wait_quiet  # noqa: E402
from thrum import events as ev  # noqa: E402

ENV = {"THRUM_WS_PORT": "0", "THRUM_SYNC_INTERVAL": "3600", "THRUM_SYNC_DEBOUNCE": "3600", "THRUM_NO_AUTOSTART": "1"}
SIG = pygit2.Signature("bench", "bench@example.invalid", 1700000000, 0)
WORDS = (
    "auth module tests green review ready merge deploy failing flaky fix patch branch rebase "
    "conflict schema migration index query latency budget release notes docs api client "
    "server daemon sync remote push fetch worktree shard event projection fold rebuild"
).split()


# --------------------------------------------------------------------------- generation


class Gen:
    """Valid, signed event lines (as the daemon writes them): ULID ids from
    `thrum.events.new_ulid`, message ids bound to their author's key, signatures, and
    a seal per segment; the agents' keys are identities of machine A."""

    def __init__(self, signing: Signing, seed: int = 7):
        self.rng = random.Random(seed)
        self.signing = signing
        self.sessions: dict[str, str] = {}

    def lifecycle(self, agents: list[str]) -> bytes:
        out = []
        for i, a in enumerate(agents):
            out.append(ev.encode_line(self.signing.agent(a, f"role{i % 10}")))
            s = ev.SessionStart(agent_id=a)
            self.sessions[a] = s.session_id
            out.append(ev.encode_line(self.signing.sign(s.to_dict())))
        return b"".join(out)

    def message(self, author: str, others: list[str], ts: str) -> bytes:
        rng = self.rng
        eid = ev.new_ulid()
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
        mention = others[rng.randrange(len(others))]
        return (
            orjson.dumps(
                self.signing.sign(
                    {
                        "type": "message.create",
                        "timestamp": ts,
                        "event_id": eid,
                        "v": 1,
                        "message_id": self.signing.message_id(author),
                        "thread_id": "thr_" + eid,
                        "agent_id": author,
                        "session_id": self.sessions[author],
                        "body": {"format": "markdown", "content": text, "structured": ""},
                        "scopes": [],
                        "refs": [{"type": "mention", "value": mention}],
                        "priority": "normal",
                        "authored_by": "",
                        "disclosed": False,
                    }
                )
            )
            + b"\n"
        )

    def messages(self, worktree: Path, agents: list[str], everyone: list[str], n: int) -> None:
        """Append n messages spread evenly (round robin) over ``agents``' streams."""
        bufs: dict[str, list[bytes]] = {a: [] for a in agents}
        ts = ev.now_rfc3339()
        with SegmentWriter(worktree, signing=self.signing) as segments:

            def flush():
                for a, lines in bufs.items():
                    if lines:
                        segments.append(f"messages/{a}", lines, signer=a)
                        bufs[a] = []

            for i in range(n):
                if i % 1000 == 0:
                    ts = ev.now_rfc3339()
                a = agents[i % len(agents)]
                bufs[a].append(self.message(a, everyone, ts))
                if i % 200_000 == 199_999:
                    flush()
            flush()

    def lifecycle_into(self, worktree: Path, agents: list[str]) -> None:
        with SegmentWriter(worktree, signing=self.signing) as segments:
            segments.append("events", self.lifecycle(agents).splitlines(keepends=True))


# --------------------------------------------------------------------------- machines


def make_remote(path: Path) -> None:
    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
    blob = repo.create_blob(b"# bench\n")
    tb = repo.TreeBuilder()
    tb.insert("README.md", blob, pygit2.enums.FileMode.BLOB)
    repo.create_commit("refs/heads/main", SIG, SIG, "init\n", tb.write(), [])


def clone(remote: Path, dest: Path) -> None:
    repo = pygit2.clone_repository(str(remote), str(dest))
    repo.config["user.name"] = "bench"
    repo.config["user.email"] = "bench@example.invalid"


def rpc(paths, method: str, params: dict | None = None, timeout: float = 60.0):
    from thrum import lifecycle

    return lifecycle.call(paths, method, params or {}, timeout=timeout)


SETTLE_S = 0.3  # after a sync's answer, before its daemon's CPU is read again (see the docstring)


class ProcessCPU:
    """CPU seconds another process has spent, all threads (its process CPU clock:
    nanoseconds, not /proc's 10 ms ticks; falls back to /proc/PID/stat)."""

    _libc = ctypes.CDLL(None, use_errno=True)

    def __init__(self, pid: int | None):
        self.pid = pid
        self._clock: int | None = None
        clock = ctypes.c_int()
        if pid is not None and self._libc.clock_getcpuclockid(pid, ctypes.byref(clock)) == 0:
            self._clock = clock.value

    def seconds(self) -> float:
        if self._clock is not None:
            try:
                return time.clock_gettime(self._clock)
            except OSError:
                pass
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return float("nan")


def timed_sync(paths, timeout: float = 600.0, cpu: ProcessCPU | None = None) -> tuple[float, dict, float]:
    """(wall seconds of the ``sync.run`` round trip, its report, the daemon's CPU seconds)."""
    before = cpu.seconds() if cpu is not None else float("nan")
    t = time.perf_counter()
    report = rpc(paths, "sync.run", timeout=timeout)
    dt = time.perf_counter() - t
    if cpu is None:
        return dt, report, float("nan")
    time.sleep(SETTLE_S)
    return dt, report, cpu.seconds() - before


class Measure:
    """One row of the table: wall times, the daemon's CPU and the cycle's phases per run."""

    def __init__(self, name: str, target: float | None = None):
        self.name = name
        self.target = target
        self.times: list[float] = []
        self.cpu: list[float] = []
        self.phases: list[dict[str, float]] = []

    def add(self, dt: float, report: dict, cpu: float) -> None:
        self.times.append(dt)
        self.cpu.append(cpu)
        self.phases.append(report.get("phases_ms") or {})


def rss_mib(pid: int | None, field: str = "VmHWM") -> float:
    """A memory figure of ``pid`` from /proc: VmHWM (peak RSS, which counts the mapped
    projection database's pages) or RssAnon (the daemon's own memory, now)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except (OSError, TypeError, ValueError):
        pass
    return float("nan")


def wait_for_tidy(pids: list[int | None], timeout: float = 3600, quiet_s: float = 3.0) -> None:
    """Until no daemon has had a child process (git's repack of a store: `thrum.sync.maintenance`)
    for ``quiet_s`` seconds."""
    if not wait_quiet(pids, timeout, quiet_s):
        raise TimeoutError(f"object stores still being consolidated after {timeout:.0f}s")


def step(msg: str):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- the benchmark


def wait_for_detached_repacks() -> float | None:
    """Wait for the full repacks an offline sync left to a child (`thrum.sync.fullrepack`):
    what `thrum sync` returns before, and what must not run beside a timed sync; seconds
    waited (None: there was none)."""
    from thrum.sync.fullrepack import running_children

    if not running_children():
        return None
    t = time.perf_counter()
    while running_children():
        time.sleep(0.1)
    return time.perf_counter() - t


def run(args) -> list[tuple]:
    from thrum import lifecycle
    from thrum.sync.offline import run_offline
    from thrum.sync.worktree import sync_worktree_path

    for k in ("THRUM_NAME", "THRUM_ROLE", "THRUM_MODULE", "THRUM_LOCAL"):
        os.environ.pop(k, None)
    os.environ.update(ENV)
    base = Path(args.base) if args.base else Path(tempfile.mkdtemp(prefix="thrum-bench-sync-"))
    base.mkdir(parents=True, exist_ok=True)
    remote, a_dir, b_dir = base / "remote.git", base / "a", base / "b"
    started = []
    rows: list = []
    agents = [f"agent_{i:02d}" for i in range(args.agents)]
    try:
        step(f"setting up in {base}")
        make_remote(remote)
        clone(remote, a_dir)
        pa = lifecycle.init_repo(a_dir, start_daemon=False)
        gen = Gen(Signing(pa.identities))
        wt_a = sync_worktree_path(a_dir)
        t = time.perf_counter()
        gen.lifecycle_into(wt_a, agents)
        gen.messages(wt_a, agents, agents, args.events)
        size = sum(p.stat().st_size for p in wt_a.rglob("*.jsonl"))
        step(
            f"wrote {args.events:,} events ({size / 2**20:,.0f} MiB, "
            f"{size / args.agents / 2**20:,.1f} MiB per agent, "
            f"{sum(1 for _ in wt_a.rglob('*.jsonl')):,} files) in {time.perf_counter() - t:.1f}s"
        )

        t = time.perf_counter()
        lifecycle.start(pa, timeout=1800)
        started.append(pa)
        step(f"A daemon up (folded the history) in {time.perf_counter() - t:.1f}s")
        dt, rep, _ = timed_sync(pa, timeout=3600)
        step(f"A first sync (commit + push of the history): {dt:.1f}s, sent {rep['sent']:,}")

        t = time.perf_counter()
        clone(remote, b_dir)
        pb = lifecycle.init_repo(b_dir, start_daemon=False)
        step(f"B cloned and attached in {time.perf_counter() - t:.1f}s")
        t = time.perf_counter()
        lifecycle.start(pb, timeout=1800)
        started.append(pb)
        step(
            f"B daemon up (folded the history) in {time.perf_counter() - t:.1f}s, "
            f"peak RSS {rss_mib(lifecycle.read_pid(pb)):,.0f} MiB, "
            f"own memory (RssAnon) {rss_mib(lifecycle.read_pid(pb), 'RssAnon'):,.0f} MiB"
        )
        wt_b = sync_worktree_path(b_dir)
        for p in (pa, pb):  # settle: anything the daemons wrote at start
            rpc(p, "sync.run", timeout=600)
        rpc(pa, "sync.run", timeout=600)
        t = time.perf_counter()
        wait_for_tidy([lifecycle.read_pid(pa), lifecycle.read_pid(pb)])
        step(
            f"object stores quiet (no git repack running beside the daemons "
            f"for a few seconds) after {time.perf_counter() - t:.1f}s more"
        )

        cpu_a, cpu_b = ProcessCPU(lifecycle.read_pid(pa)), ProcessCPU(lifecycle.read_pid(pb))

        # -- no-op
        for m, p, cpu in (("B", pb, cpu_b), ("A", pa, cpu_a)):
            noop = Measure(f"no-op sync on {m}", 0.100)
            for _ in range(args.runs):
                dt, rep, spent = timed_sync(p, cpu=cpu)
                assert rep["received"] == 0 and rep["sent"] == 0 and rep["commits"] == 0, rep
                noop.add(dt, rep, spent)
            rows.append(noop)
        step("no-op measured")

        # -- 10 events
        send = Measure("10-event sync, sender A", 0.030)  # issue 11 (was 200 ms, issue 4)
        recv = Measure("10-event sync, receiver B", 0.030)
        for r in range(args.runs):
            sender = agents[r % len(agents)]
            for i in range(10):
                rpc(
                    pa,
                    "message.send",
                    {
                        "caller": sender,
                        "content": f"bench run {r} message {i}",
                        "to": [f"@{agents[(r + i + 1) % len(agents)]}"],
                    },
                )
            dt, rep, spent = timed_sync(pa, cpu=cpu_a)
            assert rep["sent"] >= 10 and rep["pushed"], rep  # and the seal the daemon adds before committing
            send.add(dt, rep, spent)
            dt, rep, spent = timed_sync(pb, cpu=cpu_b)
            assert rep["received"] >= 10, rep
            recv.add(dt, rep, spent)
        rows += [send, recv]
        step("10-event syncs measured")

        # -- 10,000 events (A's daemon stopped; lines appended to its worktree files)
        lifecycle.stop(pa)
        started.remove(pa)
        shapes = [("new streams", 10), ("all streams", 0)]
        for shape, n_new in shapes:
            if args.big_runs <= 0:
                break
            recv = Measure(f"receive {args.big:,} events, {shape}", 1.0 if n_new == 0 else 1.5)
            offline, folds, git_side = [], [], []
            for r in range(args.big_runs):
                if n_new:
                    new = [f"new{r}_{i:02d}" for i in range(n_new)]
                    gen.lifecycle_into(wt_a, new)
                    gen.messages(wt_a, new, agents, args.big)
                else:
                    gen.messages(wt_a, agents, agents, args.big)
                t = time.perf_counter()
                rep = run_offline(pa)
                offline.append(time.perf_counter() - t)
                assert rep["pushed"], rep
                waited = wait_for_detached_repacks()  # not beside B's timed sync
                if waited is not None:
                    step(f"A's detached full repack after its offline sync ran {waited:.0f} s more")
                dt, rep, spent = timed_sync(pb, cpu=cpu_b)
                assert rep["received"] >= args.big, rep
                recv.add(dt, rep, spent)
                phases = rep.get("phases_ms", {})
                folds.append(phases.get("fold", 0) / 1000)
                git_side.append(sum(v for k, v in phases.items() if k != "fold") / 1000)
            rows.append(recv)
            rows.append((f"  (A offline commit+push, {shape})", offline, None))
            rows.append(("  (B: fetch + merge + commit + push)", git_side, None))
            rows.append(("  (B: fold, trust check included)", folds, None))
            step(f"{args.big:,}-event receive ({shape}) measured")
        rows.append(("B daemon peak RSS at the end (MiB)", None, rss_mib(lifecycle.read_pid(pb))))
        rows.append(
            (
                f"B daemon own memory (RssAnon, MiB), {sum(1 for _ in wt_b.rglob('*.jsonl')):,} files",
                None,
                rss_mib(lifecycle.read_pid(pb), "RssAnon"),
            )
        )
        same = all(
            (wt_a / rel).read_bytes() == (wt_b / rel).read_bytes()
            for rel in (p.relative_to(wt_b) for p in wt_b.rglob("*.jsonl"))
        )
        step(f"shards byte-identical on A and B: {same}")
        return rows
    finally:
        for p in started:
            try:
                lifecycle.stop(p)
            except Exception as exc:  # noqa: BLE001
                print(f"could not stop a daemon: {exc}", file=sys.stderr)
        if not args.keep and not args.base:
            shutil.rmtree(base, ignore_errors=True)
        elif args.keep:
            print(f"kept {base}")


def print_table(rows, args) -> None:
    print(
        f"\nsync benchmark: {args.events:,}-event history over {args.agents} agents, "
        f"medians of {args.runs} runs ({args.big_runs} for the 10,000-event receives); "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"  {'measure':44} {'median':>9} {'min':>9} {'max':>9} {'CPU':>9}  target")
    for row in rows:
        if isinstance(row, Measure):
            name, times, target = row.name, row.times, row.target
            cpu = f"{statistics.median(row.cpu) * 1000:7.1f}ms"
        else:
            (name, times, target), cpu = row, ""
        if times is None:
            print(f"  {name:44} {target:9.0f}")
            continue
        med = statistics.median(times)
        tgt = "" if target is None else f"<= {target * 1000:.0f} ms  {'ok' if med <= target else 'MISSED'}"
        print(f"  {name:44} {med * 1000:7.0f}ms {min(times) * 1000:7.0f}ms {max(times) * 1000:7.0f}ms {cpu:>9}  {tgt}")
    print("  (CPU: the syncing daemon's, all threads, median per sync)")
    measures = [r for r in rows if isinstance(r, Measure)]
    names = list(dict.fromkeys(k for m in measures for p in m.phases for k in p))
    print(f"\n  phases, median ms (as the cycle reports them)\n  {'measure':44}" + "".join(f" {k:>8}" for k in names))
    for m in measures:
        cells = "".join(f" {statistics.median([p.get(k, 0.0) for p in m.phases]):8.1f}" for k in names)
        print(f"  {m.name:44}{cells}")
    print(f"  bench process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000, help="message events in the history")
    p.add_argument("--agents", type=int, default=50, help="agents (message shards) in the history")
    p.add_argument("--runs", type=int, default=5, help="runs per no-op / 10-event measure")
    p.add_argument("--big", type=int, default=10_000, help="events in the big receive")
    p.add_argument("--big-runs", type=int, default=5, help="runs per big-receive shape")
    p.add_argument("--base", help="work in this directory (kept) instead of a temp dir")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (daemon logs, repos)")
    args = p.parse_args(argv)
    t = time.perf_counter()
    rows = run(args)
    print_table(rows, args)
    print(f"  total run time: {time.perf_counter() - t:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

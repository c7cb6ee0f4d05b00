#!/usr/bin/env python3
"""The projection rebuild alone (issue 29): CPU time, wall time, phases and peak memory.

Each rebuild runs in a child process of its own, so its ``ru_maxrss`` is the rebuild's
alone (the generator and other runs do not count), and its CPU time is what the rest of
a shared machine changes least. The log is the store benchmark's (`bench.generate_store_log`:
signed, chained, sealed, as the daemon writes it); the rebuild is the daemon's (trust
check; ``remembered``: with the verdict memory a first rebuild left, the usual case).

``--src DIR`` runs the children from another checkout (its own ``thrum``), so that
before/after runs can be interleaved on one log:

    python scripts/bench_rebuild.py --data-dir /tmp/rb --events 1000000 --runs 3
    python scripts/bench_rebuild.py --data-dir /tmp/rb --reuse --src /path/to/old/checkout --src . --runs 3

``--reader here --reader thread`` runs each checkout's rebuild both ways (`projection.rebuild`'s
``reader``: the log read in turn with the fold, or a batch ahead by a thread); CPU is given
for the whole process and for the folding thread alone (the reader thread is most of the
rest): on an idle two-core machine the wall time is bounded by the busier thread.

``--judge here --judge apart`` runs it judging the lines in the folding process or in a
second one (`projection.rebuild`'s ``judge``: `thrum.store.judge_process`); the second
process's CPU and peak memory are given apart (``2nd proc``; ``total`` adds it). The
rebuild's fold keeps its keys and facts in files, as the daemon's does (fresh for each run).

A child prints one JSON line; the parent prints a table of the medians per checkout.
Each run's line also gives the peak memory of each phase (``mem``: the largest RSS seen
while the phase ran, and of it the anonymous memory, i.e. the heap, SQLite's page cache and
sorter, and the file-backed pages, i.e. the database read through ``mmap``), sampled from
/proc every 20 ms by a thread of the child: what to shrink to bring the peak down.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class MemorySampler(threading.Thread):
    """The largest RSS (and its anonymous and file-backed parts, MiB) seen per phase, from
    /proc/self/status every ``interval`` seconds; ``phase`` is set by the rebuild's progress
    reports and, after it, split into the finishing steps by their timings (`phases`)."""

    def __init__(self, interval: float = 0.02):
        super().__init__(daemon=True)
        self.interval = interval
        self.samples: list[tuple[float, float, float, float]] = []  # (time, rss, anon, file) MiB
        self.marks: list[tuple[float, str]] = [(time.perf_counter(), "start")]
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.samples.append((time.perf_counter(), *_status_mib()))

    def mark(self, phase: str) -> None:
        if phase != self.marks[-1][1]:
            self.marks.append((time.perf_counter(), phase))

    def phases(self, timings: dict[str, float]) -> dict[str, list[float]]:
        """Peak (rss, anon, file) per phase: load, chains, each finishing step (query indexes
        together, counters, search index), in the order they ran."""
        marks = [m for m in self.marks if m[1] in ("start", "load")]
        finish = next((t for t, name in self.marks if name == "indexes"), None)
        if finish is not None:
            chains = timings.get("chains", 0.0)
            marks.append((finish - chains, "chains"))
            at = finish
            indexes = sum(v for k, v in timings.items() if k.startswith("index "))
            for name, length in (
                ("query indexes", indexes),
                ("counters", timings.get("counters", 0.0)),
                ("search index", timings.get("search_index", 0.0)),
            ):
                marks.append((at, name))
                at += length
            marks.append((at, "after"))
        peaks: dict[str, list[float]] = {}
        for t, rss, anon, file in self.samples:
            name = [n for at, n in marks if at <= t][-1] if marks[0][0] <= t else "start"
            peak = peaks.setdefault(name, [0.0, 0.0, 0.0])
            for i, v in enumerate((rss, anon, file)):
                peak[i] = max(peak[i], v)
        return peaks


def _status_mib() -> tuple[float, float, float]:
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                found[key] = int(line.split()[1]) / 1024
    return found.get("VmRSS", 0.0), found.get("RssAnon", 0.0), found.get("RssFile", 0.0)


def child(src: str, data: Path, kind: str, reader: str = "", judge: str = "") -> None:
    """One rebuild, in this process; prints its figures as one JSON line."""
    sys.path.insert(0, src)
    import gc

    from thrum.daemon.limits import tune_allocator
    from thrum.store import database, projection
    from thrum.store.facts import FactFile
    from thrum.store.log import EventLog
    from thrum.store.verified import VerifiedFold
    from thrum.trust.ring import KeyRing
    from thrum.trust.verdicts import VerdictMemory
    from thrum.trust.verify import Verifier

    tune_allocator()  # as the daemon's process does (large blocks mapped on their own: freed, they go back)
    db_path = data / f"rebuild-{os.getpid()}.db"
    memory = data / "verified-lines"
    if kind == "first":
        memory.unlink(missing_ok=True)
    fold_fn = None
    state = data / f"state-{os.getpid()}"  # the keys and facts this rebuild learns, kept as the daemon keeps them
    if kind != "plain":
        ring = KeyRing(state / "known_keys.json", None)
        fold_fn = VerifiedFold(Verifier(ring), VerdictMemory(memory), facts=FactFile(state / "team-facts.jsonl"))
    db = database.open_database(db_path)
    gc.collect()
    sampler = MemorySampler()
    sampler.start()
    options = inspect.signature(projection.rebuild).parameters
    t, cpu, main, kids = time.perf_counter(), time.process_time(), time.thread_time(), _children_cpu()
    result = projection.rebuild(
        db,
        EventLog(data / "log"),
        fold_fn=fold_fn,
        progress=lambda phase, *_: sampler.mark(phase),
        **({"reader": reader} if reader and "reader" in options else {}),
        **({"judge": judge} if judge and "judge" in options else {}),
    )
    wall, cpu, main = time.perf_counter() - t, time.process_time() - cpu, time.thread_time() - main
    kids = _children_cpu() - kids
    sampler.done.set()
    sampler.join()
    db.close()
    size = db_path.stat().st_size
    for p in data.glob(db_path.name + "*"):
        p.unlink()
    shutil.rmtree(state, ignore_errors=True)
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": cpu,  # this process's threads (the rebuild's, a reader thread, the sampler)
                "cpu_main": main,  # the thread that folds
                "cpu_children": kids,  # processes it started (a second process judging the lines)
                "children_maxrss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "db_mib": size / 2**20,
                "refused": result.refused,
                "malformed": result.malformed,
                "timings": result.timings,
                "mem": sampler.phases(result.timings),
            }
        ),
        flush=True,
    )


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_child(src: str, data: Path, kind: str, reader: str = "", judge: str = "") -> dict:
    argv = [sys.executable, __file__, "--child", src, str(data), kind, reader or "-", judge or "-"]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"a rebuild from {src} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def generate(data: Path, events: int) -> int:
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import generate_store_log  # noqa: PLC0415 - the store benchmark's generator

    shutil.rmtree(data / "log", ignore_errors=True)
    t = time.perf_counter()
    info = generate_store_log(data / "log", events)
    print(f"generated {info['creates']:,} creates and {info['marks']:,} read marks in {time.perf_counter() - t:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", help="the log (and verdict memory) live here (required)")
    p.add_argument("--events", type=int, default=1_000_000, help="message.create events to generate")
    p.add_argument("--reuse", action="store_true", help="reuse the log already in --data-dir")
    p.add_argument("--runs", type=int, default=3, help="rebuilds per checkout (interleaved)")
    p.add_argument("--src", action="append", help="checkout(s) whose thrum rebuilds (default: this one)")
    p.add_argument(
        "--kind", default="remembered", choices=["remembered", "first", "plain"], help="the rebuild to measure"
    )
    p.add_argument(
        "--reader",
        action="append",
        choices=["auto", "here", "thread"],
        help="where the log is read and decoded (`projection.rebuild`'s reader; repeat to compare)",
    )
    p.add_argument(
        "--judge",
        action="append",
        choices=["auto", "here", "apart"],
        help="where the lines are judged (`projection.rebuild`'s judge: here or by a second process; repeatable)",
    )
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child[0], Path(args.child[1]), args.child[2], *(a if a != "-" else "" for a in args.child[3:]))
        return 0
    if not args.data_dir:
        p.error("--data-dir is required")
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    if not (args.reuse and (data / "log").exists()):
        generate(data, args.events)
    lines = sum(p.read_bytes().count(b"\n") for p in (data / "log").rglob("*.jsonl"))
    srcs = [str(Path(s).resolve()) for s in (args.src or [str(ROOT)])]
    if args.kind == "remembered" and not (data / "verified-lines").exists():
        run_child(srcs[0], data, "first")  # leaves the verdict memory the usual rebuild reads

    def ways(src: str) -> list[tuple[str, str]]:  # a checkout from before a choice: its one way
        readers = (args.reader or [""]) if (Path(src) / "thrum/store/readahead.py").exists() else [""]
        judges = (args.judge or [""]) if (Path(src) / "thrum/store/judge_process.py").exists() else [""]
        return [(r, j) for r in readers for j in judges]

    def label(src: str, reader: str, judge: str) -> str:
        return " ".join(x for x in (src, reader, judge and f"judge={judge}") if x)

    runs: dict[str, list[dict]] = {label(s, r, j): [] for s in srcs for r, j in ways(s)}
    for i in range(args.runs):
        for s in srcs:
            for reader, judge in ways(s):
                r = run_child(s, data, args.kind, reader, judge)
                runs[label(s, reader, judge)].append(r)
                print(
                    f"run {i + 1} {label(s, reader, judge)}: cpu {r['cpu']:.1f} s "
                    f"(folding thread {r.get('cpu_main', 0):.1f}), "
                    f"other threads {r['cpu'] - r.get('cpu_main', r['cpu']):.1f} s, "
                    f"second process {r.get('cpu_children', 0):.1f} s, wall {r['wall']:.1f} s, "
                    f"maxrss {r['maxrss_mib']:,.0f} MiB (second process {r.get('children_maxrss_mib', 0):,.0f}), "
                    + ", ".join(f"{k} {v:.1f}" for k, v in r["timings"].items() if not k.startswith("index ")),
                    flush=True,
                )
                print(
                    "  peak MiB (rss = anon + file): "
                    + ", ".join(f"{k} {v[0]:,.0f} = {v[1]:,.0f} + {v[2]:,.0f}" for k, v in r.get("mem", {}).items()),
                    flush=True,
                )
    print(f"\nrebuild ({args.kind}) of {lines:,} log lines, median of {args.runs}:")
    print(
        f"{'checkout (reader, judge)':<40} {'CPU s':>8} {'folding':>8} {'others':>8} {'2nd proc':>8}"
        f" {'total':>8} {'wall s':>8} {'load s':>7}"
        f" {'ev/s (wall)':>12} {'maxrss MiB':>11}"
    )
    for s, rs in runs.items():
        if not rs:  # --runs 0: the log (and its verdict memory) made, nothing measured
            continue
        cpu = statistics.median(r["cpu"] for r in rs)
        others = statistics.median(r["cpu"] - r.get("cpu_main", r["cpu"]) for r in rs)
        main = statistics.median(r.get("cpu_main", 0.0) for r in rs)
        second = statistics.median(r.get("cpu_children", 0.0) for r in rs)
        whole = statistics.median(r["cpu"] + r.get("cpu_children", 0.0) for r in rs)
        wall = statistics.median(r["wall"] for r in rs)
        load = statistics.median(r["timings"].get("load", 0.0) for r in rs)
        rss = max(r["maxrss_mib"] for r in rs)
        print(
            f"{s[-40:]:<40} {cpu:8.1f} {main:8.1f} {others:8.1f} {second:8.1f} {whole:8.1f} {wall:8.1f} {load:7.1f}"
            f" {lines / wall:12,.0f} {rss:11,.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

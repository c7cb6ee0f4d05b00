#!/usr/bin/env python3
"""What a sync's fetch costs beside a code repository: CPU of the fetch and of a 10-event receive.

Usage:
    python scripts/bench_fetch.py [--code-files 50000] [--foreign-files 10000] [--log-files 2000]
                                  [--rounds 12] [--pairs 2] [--src DIR ...]

In a team the remote is the project's code remote and each replica's repository is the
user's checkout of it, so beside the log's ``a-sync`` branch there is code:

- ``main``, ``--code-files`` files (in directories of 100), held by the remote and both
  replicas (they cloned it);
- ``feature``, ``--foreign-files`` other files, pushed after the replicas cloned (a
  teammate's branch neither replica fetched), with an annotated tag on it, and a
  lightweight tag on ``main``.

The log's history is ``--log-files`` files of one event each, pushed by A and received
by B before measuring. Each round A appends 10 events to one file and syncs (its CPU is
not counted), then B, in this process (no daemon, nothing folded), either fetches alone
(even rounds: the fetch's CPU) or runs a whole sync cycle (odd rounds: the 10-event
receive's CPU, fetch, merge, commit and tidy-up), then fetches once more with nothing
new (what a no-op sync's fetch costs). CPU is this thread's
(``time.thread_time``): libgit2 works in the calling thread. Also reported: the objects
in B's store after the rounds (the code the fetches brought).

Each ``--src`` is a thrum checkout to import (default: this one); with several, each is
measured in its own process, ``--pairs`` times, interleaved (A B A B), and the table
compares them. Every process builds its own set-up under a temp dir and deletes it.
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


def _sig(offset: int = 0):
    import pygit2

    return pygit2.Signature("bench", "bench@example.invalid", 1_700_000_000 + offset, 0)


def _code_tree(repo, files: int, seed: str):
    import pygit2

    top = repo.TreeBuilder()
    for d in range(0, files, 100):
        sub = repo.TreeBuilder()
        for i in range(d, min(d + 100, files)):
            sub.insert(f"f{i:06d}.txt", repo.create_blob(f"{seed} {i}\n".encode()), pygit2.enums.FileMode.BLOB)
        top.insert(f"d{d // 100:04d}", sub.write(), pygit2.enums.FileMode.TREE)
    return top.write()


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def _event(i: int, run: str) -> bytes:
    obj = {"type": "message.create", "event_id": f"01{run}{i:020d}", "agent_id": "alice"}
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def _append(worktree: Path, rel: str, lines: list[bytes]) -> None:
    path = worktree / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(b"".join(lines))


def measure(args) -> dict:
    import pygit2

    from thrum.sync.cycle import run_cycle
    from thrum.sync.logaccess import PlainLog
    from thrum.sync.replicate import Replicator
    from thrum.sync.worktree import ensure_sync_worktree

    class Told(PlainLog):
        """The log as the daemon's writer lends it: it knows what it appended (PlainLog
        alone asks git's status, and reads every file of the log)."""

        def appended(self) -> list[str]:
            return super().appended() or []

        def nothing_appended(self) -> bool:
            return self._noted is None

    base = Path(tempfile.mkdtemp(prefix="thrum-bench-fetch-"))
    try:
        t = time.perf_counter()
        remote = base / "remote.git"
        bare = pygit2.init_repository(str(remote), bare=True, initial_head="main")
        bare.create_commit("refs/heads/main", _sig(), _sig(), "code\n", _code_tree(bare, args.code_files, "main"), [])
        _git("-C", str(remote), "repack", "-adq")
        replicas = {}
        for name in ("a", "b"):
            repo = pygit2.clone_repository(str(remote), str(base / name))
            repo.config["user.name"] = "bench"
            repo.config["user.email"] = "bench@example.invalid"
        bare = pygit2.Repository(str(remote))
        main = bare.references["refs/heads/main"].target
        tree = _code_tree(bare, args.foreign_files, "feature")
        feature = bare.create_commit("refs/heads/feature", _sig(5), _sig(5), "feature\n", tree, [main])
        bare.create_tag("v1.0", feature, pygit2.enums.ObjectType.COMMIT, _sig(6), "v1.0\n")
        bare.references.create("refs/tags/light", main)
        for name in ("a", "b"):
            wt = ensure_sync_worktree(base / name)
            replicas[name] = (wt, Replicator(wt), Told(wt))
        wt_a, rep_a, log_a = replicas["a"]
        for i in range(args.log_files):
            _append(wt_a, f"messages/agent_{i % 50:02d}/{i + 1:06d}.jsonl", [_event(i, "H")])
            log_a.note_appended([f"messages/agent_{i % 50:02d}/{i + 1:06d}.jsonl"])
        assert run_cycle(rep_a, log_a).pushed
        wt_b, rep_b, log_b = replicas["b"]
        first = run_cycle(rep_b, log_b)
        assert first.received == args.log_files, first
        for where in (remote, base / "a" / ".git", base / "b" / ".git"):
            _git("-C", str(where), "repack", "-adq")
        setup_s = time.perf_counter() - t

        fetch_cpu, cycle_cpu, noop_cpu = [], [], []
        for r in range(args.rounds):
            _append(wt_a, "messages/agent_00/000001.jsonl", [_event(i, f"R{r:03d}") for i in range(10)])
            log_a.note_appended(["messages/agent_00/000001.jsonl"])
            assert run_cycle(rep_a, log_a).pushed
            if r % 2 == 0:
                c = time.thread_time()
                tip = rep_b.fetch()
                fetch_cpu.append(time.thread_time() - c)
                assert tip is not None
                assert run_cycle(rep_b, log_b).received == 10
            else:
                c = time.thread_time()
                report = run_cycle(rep_b, log_b)
                cycle_cpu.append(time.thread_time() - c)
                assert report.received == 10, report
            c = time.thread_time()
            rep_b.fetch()  # nothing new: what every no-op sync's fetch costs
            noop_cpu.append(time.thread_time() - c)
        count = subprocess.run(
            ["git", "-C", str(base / "b"), "count-objects", "-v"], check=True, capture_output=True, text=True
        ).stdout
        held = dict(line.split(": ") for line in count.splitlines())
        return {
            "fetch": fetch_cpu,
            "cycle": cycle_cpu,
            "noop": noop_cpu,
            "setup_s": setup_s,
            "b_objects": int(held["count"]) + int(held["in-pack"]),
            "b_packs": int(held["packs"]),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--code-files", type=int, default=50_000, help="files on main (held by everyone)")
    p.add_argument("--foreign-files", type=int, default=10_000, help="files on a branch the replicas never fetched")
    p.add_argument("--log-files", type=int, default=2_000, help="files in the log's history")
    p.add_argument("--rounds", type=int, default=12, help="10-event rounds per process (half fetch, half cycle)")
    p.add_argument("--pairs", type=int, default=2, help="processes per --src, interleaved")
    p.add_argument("--src", action="append", help="a thrum checkout to measure (repeatable; default: this one)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        sys.path.insert(0, args.child)
        print(json.dumps(measure(args)))
        return 0
    sources = [str(Path(s).resolve()) for s in (args.src or [str(ROOT)])]
    results: dict[str, list[dict]] = {s: [] for s in sources}
    passthrough = [
        f"--code-files={args.code_files}",
        f"--foreign-files={args.foreign_files}",
        f"--log-files={args.log_files}",
        f"--rounds={args.rounds}",
    ]
    for n in range(args.pairs):
        for src in sources:
            out = subprocess.run(
                [sys.executable, __file__, *passthrough, f"--child={src}"],
                check=True,
                capture_output=True,
                text=True,
                cwd=src,
            ).stdout
            results[src].append(json.loads(out.strip().splitlines()[-1]))
            print(f"  run {n + 1}/{args.pairs} of {src} done", file=sys.stderr)
    print(
        f"\nfetch beside code: {args.code_files:,} files on main (held), {args.foreign_files:,} on a branch "
        f"not held (+ tags), log of {args.log_files:,} files; {args.rounds} rounds x {args.pairs} processes; "
        f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    print(
        f"  {'source':40} {'fetch CPU':>14} {'10-event receive CPU':>22} {'no-op fetch':>12}"
        f" {'B objects':>10} {'B packs':>8}"
    )
    for src, runs in results.items():
        fetch = [x for r in runs for x in r["fetch"]]
        cycle = [x for r in runs for x in r["cycle"]]
        noop = [x for r in runs for x in r["noop"]]
        objects = statistics.median(r["b_objects"] for r in runs)
        packs = statistics.median(r["b_packs"] for r in runs)
        setup = statistics.median(r["setup_s"] for r in runs)
        print(
            f"  {src[-40:]:40} {statistics.median(fetch) * 1000:9.1f} ms  {statistics.median(cycle) * 1000:15.1f} ms"
            f" {statistics.median(noop) * 1000:9.2f} ms {objects:10,.0f} {packs:8.0f}"
        )
        print(
            f"  {'':40} min-max {min(fetch) * 1000:.1f}-{max(fetch) * 1000:.1f} ms, "
            f"{min(cycle) * 1000:.1f}-{max(cycle) * 1000:.1f} ms; set-up {setup:.0f} s"
        )
    print("  (CPU: the measuring thread's, median per round; libgit2 works in that thread)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

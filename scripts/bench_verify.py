#!/usr/bin/env python3
"""``thrum verify`` benchmark (issue 25, item 7): a 10,000-event push judged on the remote's side.

Usage:
    python scripts/bench_verify.py [--events N] [--push P] [--runs R]

A bare repository holds an ``a-sync`` commit with a history of N message.create events
(default 1,000,000) over 50 agents, plus their registrations and sessions, written as
the daemon writes them (signed, chained, one seal per segment and signer:
`bench_segments`). A second commit adds P events (default 10,000) spread over every
agent's stream. Measured: `verify_range(old, new)` in-process (median of R runs), and
the whole ``thrum verify --from OLD --to NEW`` command once (process start included), each
with its CPU time: on a loaded machine the wall time is mostly waiting for a CPU.
Target: ≤ 2 s. Prints a table.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import pygit2  # noqa: E402

from bench_segments import Signing  # noqa: E402
from bench_sync import Gen  # noqa: E402
from thrum.sync.verifyrange import open_repository, verify_range  # noqa: E402

SIG = pygit2.Signature("bench", "bench@example.invalid", 1700000000, 0)


def tree_of(repo: pygit2.Repository, folder: Path) -> pygit2.Oid:
    tb = repo.TreeBuilder()
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_dir():
            tb.insert(entry.name, tree_of(repo, Path(entry.path)), pygit2.enums.FileMode.TREE)
        else:
            tb.insert(entry.name, repo.create_blob(Path(entry.path).read_bytes()), pygit2.enums.FileMode.BLOB)
    return tb.write()


def commit(repo: pygit2.Repository, folder: Path, parents: list) -> pygit2.Oid:
    oid = repo.create_commit(None, SIG, SIG, "a-sync\n", tree_of(repo, folder), parents)
    repo.references.create("refs/heads/a-sync", oid, force=True)
    return oid


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--push", type=int, default=10_000)
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="thrum-bench-verify-") as tmp:
        base = Path(tmp)
        work = base / "a-sync"
        work.mkdir()
        gen = Gen(Signing(base / "identities"))
        agents = [f"agent{i:02d}" for i in range(args.agents)]
        t = time.monotonic()
        gen.lifecycle_into(work, agents)
        gen.messages(work, agents, agents, args.events)
        repo = pygit2.init_repository(str(base / "remote.git"), bare=True)
        old = commit(repo, work, [])
        print(f"history of {args.events:,} events written and committed in {time.monotonic() - t:.0f} s", flush=True)
        gen.messages(work, agents, agents, args.push)
        new = commit(repo, work, [old])
        times, cpu = [], []
        for _ in range(args.runs):
            t, c = time.monotonic(), time.process_time()
            verdict = verify_range(open_repository(repo.path), str(old), str(new))
            times.append(time.monotonic() - t)
            cpu.append(time.process_time() - c)
            assert verdict.ok and verdict.added >= args.push, verdict.findings[:3]
        env = dict(os.environ)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.monotonic()
        proc = subprocess.run(
            [
                str(Path(sys.executable).parent / "thrum"),
                "verify",
                "--repo",
                str(base / "remote.git"),
                "--from",
                str(old),
                "--to",
                str(new),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        command = time.monotonic() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        command_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    print()
    print(
        f"| thrum verify of a {args.push:,}-event push on a {args.events:,}-event history | median (min–max) | target |"
    )
    print("|---|---:|---|")
    print(
        f"| verify_range, in-process ({args.runs} runs) | {statistics.median(times) * 1000:,.0f} ms "
        f"({min(times) * 1000:,.0f}–{max(times) * 1000:,.0f}) | ≤ 2 s |"
    )
    print(f"| — its CPU time (what the machine's load changes least) | {statistics.median(cpu) * 1000:,.0f} ms | |")
    print(f"| `thrum verify --from OLD --to NEW` (the command, once) | {command * 1000:,.0f} ms | ≤ 2 s |")
    print(f"| — its CPU time (process start included) | {command_cpu * 1000:,.0f} ms | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Timing a command the way a host runs it: one process, stdin given, output captured.

The hook and Gas City benchmarks (bench_hooks.py, bench_gcmail.py) measure start-up
costs, so a run that failed (or, where asked, said anything on stderr) must stop the
benchmark rather than pass as a fast run.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path


def run_ms(
    cmd: list[str], env: dict[str, str], *, cwd: Path | None = None, stdin: bytes = b"", quiet: bool = False
) -> float:
    """Milliseconds of one run of ``cmd``; exits the benchmark when it fails (or, ``quiet``, writes to stderr)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, env=env, cwd=cwd, capture_output=True)
    took = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0 or (quiet and proc.stderr):
        raise SystemExit(f"{' '.join(map(str, cmd))} failed: {proc.stderr.decode().strip()}")
    return took


def median_ms(
    cmd: list[str], env: dict[str, str], runs: int, *, cwd: Path | None = None, stdin: bytes = b"", quiet: bool = False
) -> float:
    """The median of ``runs`` runs of `run_ms`."""
    return statistics.median(run_ms(cmd, env, cwd=cwd, stdin=stdin, quiet=quiet) for _ in range(runs))

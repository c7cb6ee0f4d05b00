"""Moved to `thrum.lifecycle` (front ends must not import `thrum.daemon`).

The last shim of the moves: kept only because `scripts/bench_remotes.py` still
imports it, and the benchmark scripts change only together with their recorded
results (BENCHMARKS.md). Everything else uses `thrum.lifecycle`; delete this file
when that script moves to it.
"""

from ..lifecycle import call, init_repo, start, stop  # noqa: F401

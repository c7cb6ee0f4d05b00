#!/usr/bin/env python3
"""Decoding one log line, and building one event (issue 29): CPU µs per ``message.create``.

A rebuild decodes every line of the log (`thrum.events.decode_line`); a send builds its
event (`ev.MessageCreate(...)`, validated like a line) and writes its line. This measures
both per line, in CPU time (what other work on a shared machine changes least), on the
``message.create`` lines of the store benchmark's log (`bench.generate_store_log`: signed,
chained, as the daemon writes them):

- ``decode_line``: what a rebuild does with each line (the schema in C; the general path
  for the lines it does not take);
- ``general path``: `codec.decode_checked` (parse, then `normalise`): the lines the fast
  path refuses, and the reference it is tested against;
- ``build + line``: `ev.MessageCreate(...)` and its line, as a send builds it.

``--src DIR`` runs a child per checkout (its own ``thrum``), interleaved round by round,
so before/after figures come from the same minutes of the machine:

    git worktree add /tmp/before main
    python scripts/bench_decode.py --src /tmp/before --src . --rounds 5

Each child takes the best of ``--repeat`` passes over the lines; the table shows, per
checkout, the best and the median of the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(src: str, log: Path, n: int, repeat: int) -> None:
    """Time the three operations in this process (thrum from ``src``); print one JSON line."""
    sys.path.insert(0, src)
    from thrum import events as ev
    from thrum.events import codec

    lines = []
    for path in sorted((log / "messages").rglob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            if b'"type":"message.create"' in line:
                lines.append(line)
                if len(lines) >= n:
                    break
        if len(lines) >= n:
            break
    decoded = [ev.decode_line(line) for line in lines]
    args = [
        {
            k: d[k]
            for k in ("message_id", "thread_id", "agent_id", "session_id", "priority", "authored_by", "subject")
            if k in d
        }
        | {
            "body": ev.Body(d["body"]["content"], format=d["body"]["format"]),
            "scopes": tuple(ev.Tag(t["type"], t["value"]) for t in d["scopes"]),
            "refs": tuple(ev.Tag(t["type"], t["value"]) for t in d["refs"]),
        }
        for d in decoded
    ]

    def decode_all() -> None:
        decode = ev.decode_line
        for line in lines:
            decode(line)

    def general_all() -> None:
        decode = codec.decode_checked
        for line in lines:
            decode(line)

    def build_all() -> None:
        create = ev.MessageCreate
        for kw in args:
            create(**kw).to_line()

    out = {}
    for name, fn in (("decode_line", decode_all), ("general path", general_all), ("build + line", build_all)):
        best = float("inf")
        for _ in range(repeat):
            t = time.process_time()
            fn()
            best = min(best, time.process_time() - t)
        out[name] = best / len(lines) * 1e6
    out["lines"] = len(lines)
    print(json.dumps(out), flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", action="append", help="a checkout to measure (repeatable; default: this one)")
    ap.add_argument("--lines", type=int, default=15_000, help="message.create lines per pass")
    ap.add_argument("--repeat", type=int, default=3, help="passes per child (its best counts)")
    ap.add_argument("--rounds", type=int, default=3, help="children per checkout, interleaved")
    ap.add_argument("--log", type=Path, help="a store benchmark log to reuse (default: generate one)")
    a = ap.parse_args()
    srcs = [str(Path(s).resolve()) for s in (a.src or [str(ROOT)])]
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        log = a.log
        if log is None:
            sys.path.insert(0, str(ROOT / "scripts"))
            sys.path.insert(0, str(ROOT))
            import bench

            log = Path(tmp) / "log"
            bench.generate_store_log(log, a.lines + 1000)
        figures: dict[str, list[dict]] = {s: [] for s in srcs}
        for _ in range(a.rounds):
            for s in srcs:
                run = subprocess.run(
                    [sys.executable, __file__, "--child", s, str(log), str(a.lines), str(a.repeat)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                figures[s].append(json.loads(run.stdout.strip().splitlines()[-1]))
    print(f"CPU µs per message.create line ({figures[srcs[0]][0]['lines']} lines, best of {a.repeat} passes a child)")
    print(f"{'checkout':<40} {'operation':<14} {'best':>7} {'median':>7}   rounds")
    for s in srcs:
        for op in ("decode_line", "general path", "build + line"):
            vals = [f[op] for f in figures[s]]
            row = " ".join(f"{v:.2f}" for v in vals)
            print(f"{s[-40:]:<40} {op:<14} {min(vals):7.2f} {statistics.median(vals):7.2f}   {row}")


if __name__ == "__main__":
    main()

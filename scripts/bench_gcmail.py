"""Gas City mail benchmark (issue 14): wall time of `thrum-gc-mail check` and `send`.

Gas City starts the provider for every mail operation and its hooks call ``check``
on every prompt, so what counts is a whole process: start, one RPC, exit. Measured
like gc runs it (argv, stdin JSON for send, stdout captured), median of N runs
against a running daemon and a mailbox holding mail; `python -c pass` with the
same interpreter is the floor.
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
sys.path.insert(0, str(ROOT))

from fixtures.repos.builders import make_repo  # noqa: E402
from thrum import lifecycle  # noqa: E402
from thrum.paths import resolve  # noqa: E402

SCRIPT = shutil.which("thrum-gc-mail") or str(Path(sys.executable).parent / "thrum-gc-mail")
TARGET_MS = 50.0


def _timed(cmd: list[str], env: dict, runs: int, stdin: bytes = b"") -> float:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, input=stdin, env=env, capture_output=True)
        out.append((time.perf_counter() - t0) * 1000)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode().strip()}")
    return statistics.median(out)


def measure(runs: int = 20, mail: int = 20) -> list[tuple[str, str, str]]:
    tmp = Path(tempfile.mkdtemp(prefix="thrum-bench-gc-"))
    repo = tmp / "city"
    make_repo(repo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("THRUM_")}
    env.update({"THRUM_REPO": str(repo), "THRUM_WS_PORT": "0", "THRUM_SYNC_INTERVAL": "3600"})
    # Byte-compile first: this environment may set PYTHONDONTWRITEBYTECODE, and an
    # installed thrum always has its .pyc files.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "thrum")], check=True)
    try:
        subprocess.run([SCRIPT, "ensure-running"], env=env, check=True, capture_output=True)
        payload = json.dumps(
            {"from": "mayor", "subject": "status", "body": "all quiet"}, separators=(",", ":")
        ).encode()
        for _ in range(mail):  # a mailbox with unread mail, senders and recipient registered
            subprocess.run([SCRIPT, "send", "myrig/witness"], input=payload, env=env, check=True, capture_output=True)
        floor = _timed([sys.executable, "-c", "pass"], env, runs)
        check = _timed([SCRIPT, "check", "myrig/witness"], env, runs)
        send = _timed([SCRIPT, "send", "myrig/witness"], env, runs, stdin=payload)
    finally:
        paths = resolve(repo)
        if paths.initialized:
            lifecycle.stop(paths)
        shutil.rmtree(tmp, ignore_errors=True)
    return [
        (f"thrum-gc-mail check (median of {runs}, {mail} unread)", f"{check:.1f} ms", f"<= {TARGET_MS:.0f} ms"),
        (f"thrum-gc-mail send (median of {runs})", f"{send:.1f} ms", f"<= {TARGET_MS:.0f} ms"),
        (
            "python -c pass, same interpreter (median)",
            f"{floor:.1f} ms",
            f"check {check - floor:+.1f} ms, send {send - floor:+.1f} ms over it",
        ),
    ]


def section(args=None) -> None:
    rows = measure()
    width = max(len(r[0]) for r in rows)
    print("\ngc-mail (issue 14): provider process wall time")
    print(f"{'benchmark'.ljust(width)}  {'result':>10}  target")
    for name, value, target in rows:
        print(f"{name.ljust(width)}  {value:>10}  {target}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--mail", type=int, default=20, help="unread messages in the checked mailbox")
    args = ap.parse_args(argv)
    rows = measure(args.runs, args.mail)
    width = max(len(r[0]) for r in rows)
    print(f"{'benchmark'.ljust(width)}  {'result':>10}  target")
    for name, value, target in rows:
        print(f"{name.ljust(width)}  {value:>10}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

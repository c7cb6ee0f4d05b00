"""Gas City mail benchmark (issue 14): wall time of `thrum-gc-mail check` and `send`.

Gas City starts the provider for every mail operation and its hooks call ``check``
on every prompt, so what counts is a whole process: start, one RPC, exit. Measured
like gc runs it (argv, stdin JSON for send, stdout captured), median of N runs
against a running daemon and a mailbox holding mail; `python -c pass` with the
same interpreter is the floor.

Two mailboxes: ``myrig/witness`` with 20 unread messages (sent through the
provider, as gc sends), and ``myrig/refinery`` with 1,000 unread (a neglected
mailbox: hooks still run ``check`` on every prompt), filled through the
provider's own code in-process to keep the set-up short. The machine's load
average is printed with the results: on a shared machine it moves them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.repos.builders import make_repo  # noqa: E402
from thrum import lifecycle  # noqa: E402
from thrum.gcmail.main import Connection  # noqa: E402
from thrum.gcmail.provider import Mailer  # noqa: E402
from thrum.paths import resolve  # noqa: E402
from bench_table import print_table  # noqa: E402

from bench_process import median_ms  # noqa: E402

SCRIPT = shutil.which("thrum-gc-mail") or str(Path(sys.executable).parent / "thrum-gc-mail")
TARGET_MS = 50.0


def _timed(cmd: list[str], env: dict, runs: int, stdin: bytes = b"") -> float:
    return median_ms(cmd, env, runs, stdin=stdin)


def _fill(repo: Path, to: str, n: int, payload: bytes) -> None:
    """``n`` messages to ``to`` through the provider's own send (in-process: no process start each)."""
    conn = Connection(resolve(repo))
    try:
        mailer = Mailer(conn, conn.tag, conn.registering)
        for _ in range(n):
            mailer.send(to, payload)
    finally:
        conn.close()


def measure(runs: int = 20, mail: int = 20, big: int = 1000) -> list[tuple[str, str, str]]:
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
        _fill(repo, "myrig/refinery", big, payload)
        load = os.getloadavg()
        floor = _timed([sys.executable, "-c", "pass"], env, runs)
        check = _timed([SCRIPT, "check", "myrig/witness"], env, runs)
        check_big = _timed([SCRIPT, "check", "myrig/refinery"], env, runs)
        send = _timed([SCRIPT, "send", "myrig/witness"], env, runs, stdin=payload)
        load = max(load[0], os.getloadavg()[0])
    finally:
        paths = resolve(repo)
        if paths.initialized:
            lifecycle.stop(paths)
        shutil.rmtree(tmp, ignore_errors=True)
    return [
        (f"thrum-gc-mail check (median of {runs}, {mail} unread)", f"{check:.1f} ms", f"<= {TARGET_MS:.0f} ms"),
        (f"thrum-gc-mail check (median of {runs}, {big:,} unread)", f"{check_big:.1f} ms", f"<= {TARGET_MS:.0f} ms"),
        (f"thrum-gc-mail send (median of {runs})", f"{send:.1f} ms", f"<= {TARGET_MS:.0f} ms"),
        (
            "python -c pass, same interpreter (median)",
            f"{floor:.1f} ms",
            f"check {check - floor:+.1f} / {check_big - floor:+.1f} ms, send {send - floor:+.1f} ms over it",
        ),
        ("load average (1 min, highest seen)", f"{load:.2f}", "2 cores; other work on the machine slows every row"),
    ]


def section(args=None) -> None:
    rows = measure()
    print_table(rows, title="\ngc-mail (issue 14): provider process wall time")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--mail", type=int, default=20, help="unread messages in the small mailbox")
    ap.add_argument("--big", type=int, default=1000, help="unread messages in the large mailbox")
    args = ap.parse_args(argv)
    rows = measure(args.runs, args.mail, args.big)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

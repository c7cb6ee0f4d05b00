"""The thrum demo: agents on two machines, one git remote, messages crossing via sync.

Everything happens in a temporary directory that is removed at the end:
a bare repository plays the shared remote (GitHub, GitLab, a path: any git
remote works), and two clones play two machines, each with its own daemon.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.repos.builders import clone, make_bare  # noqa: E402

BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")


def say(text: str) -> None:
    print(f"\n{BOLD}{text}{RESET}")


def thrum(machine: Path, *args: str, env: dict, capture_json: bool = False):
    shown = " ".join(a if " " not in a else repr(a) for a in args)
    print(f"{DIM}[{machine.name}]${RESET} thrum {shown}")
    proc = subprocess.run(["thrum", *args], cwd=machine, env=env, text=True, capture_output=True)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"demo step failed: thrum {shown} (exit {proc.returncode})")
    if capture_json:
        return json.loads(proc.stdout)
    out = proc.stdout.rstrip()
    if out:
        print(textwrap.indent(out, "    "))
    return None


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="thrum-demo-"))
    env = dict(os.environ, THRUM_WS_PORT="0", THRUM_SYNC_INTERVAL="3600", THRUM_QUIET="1")
    env.pop("THRUM_NAME", None)
    machines = []
    try:
        say("1. A shared git remote and two machines that cloned it")
        remote = workdir / "team-remote.git"
        make_bare(remote, with_commit=True)
        laptop, server = workdir / "laptop", workdir / "server"
        for m in (laptop, server):
            clone(remote, m)
        print(f"    remote: {remote}\n    laptop: {laptop}\n    server: {server}")

        say("2. thrum init + an agent on each machine; a first sync introduces them to each other")
        for machine, name, role in ((server, "bob", "reviewer"), (laptop, "alice", "implementer")):
            thrum(machine, "init", "--non-interactive", env=env)
            machines.append(machine)
            thrum(machine, "quickstart", "--name", name, "--role", role, "--module", "auth", env=env)
            thrum(machine, "sync", env=env)
        thrum(laptop, "agent", "list", env=env)

        say("3. alice (laptop) asks any reviewer for a review, then syncs")
        sent = thrum(
            laptop,
            "send",
            "Auth module complete, all tests passing",
            "--to",
            "@reviewer",
            "--scope",
            "module:auth",
            "--ref",
            "issue:beads-42",
            "--json",
            env=env,
            capture_json=True,
        )
        print(f"    > Message sent: {sent['message_id']}")
        thrum(laptop, "sync", env=env)

        say("4. bob (server) syncs and finds it in his inbox")
        thrum(server, "sync", env=env)
        thrum(server, "inbox", "--mentions", env=env)
        thrum(server, "reply", sent["message_id"], "Looks good, merging now", env=env)
        thrum(server, "send", "Deploy window opens at 15:00", "--to", "@everyone", env=env)
        thrum(server, "sync", env=env)

        say("5. alice syncs: the reply and the broadcast arrive")
        thrum(laptop, "sync", env=env)
        thrum(laptop, "inbox", env=env)
        thrum(laptop, "sync", "status", env=env)

        say("6. One more round of syncs; the log is plain JSONL on the a-sync branch")
        thrum(laptop, "sync", env=env)
        thrum(server, "sync", env=env)
        logs = [
            {
                p.relative_to(m / ".git/thrum-sync/a-sync").as_posix(): p.read_bytes()
                for p in (m / ".git/thrum-sync/a-sync").rglob("*.jsonl")
            }
            for m in (laptop, server)
        ]
        print("    " + "\n    ".join(sorted(logs[0])))
        if logs[0] != logs[1]:
            raise SystemExit("demo: the two machines' logs differ after syncing both ways")
        print(f"\n{BOLD}Done.{RESET} Both machines hold byte-identical logs; every step went through git.")
        return 0
    finally:
        for machine in machines:
            subprocess.run(["thrum", "daemon", "stop"], cwd=machine, env=env, capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

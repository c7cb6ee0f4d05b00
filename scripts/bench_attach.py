#!/usr/bin/env python3
"""`thrum init` attaching to a remote with a large history (issue 29): the time a new machine waits.

Usage:
    python scripts/bench_attach.py [--events N] [--runs R] [--base DIR] [--reuse] [--no-tty] [--fetch]

Set-up (once; ``--base DIR --reuse`` keeps and reuses it): a bare remote whose ``a-sync``
branch holds N signed ``message.create`` events over 50 agents (the sync benchmark's
generator, `bench_sync.Gen`: segments of at most 64 KiB, sealed, chained), pushed by
machine A's offline cycle (no daemon on A: nothing else is measured).

Each run is a new machine B, as a person joins:

1. ``clone``: the project's ``main`` branch only (what ``git clone --single-branch`` gives),
   so that `thrum init` is what fetches the history. libgit2's clone from a path brings
   every object of the remote (its local transport ignores the refspecs), so by default
   that fetch finds the history already there and costs nothing. ``--fetch``: B is cloned
   from a copy of ``main`` alone and pointed at the remote, so `thrum init` really fetches
   the history (through libgit2's local transport, which builds the pack itself: the
   remote's work over SSH or HTTPS, which a server does from its packs, is counted too);
2. ``thrum init --non-interactive`` (the installed command, in a child process, stderr on
   a pseudo-terminal so the progress line is drawn as a person sees it; ``--no-tty``:
   on a pipe, the quiet path): the fetch of ``a-sync``, the checkout of its segments,
   the start of the daemon and its first rebuild (trust check included), until the
   daemon listens and the command returns. **This is the figure with the target
   (≤ 30 s at 1,000,000 events).**

Then B's daemon is stopped and B removed. Prints per run the clone and init times, the
init's rate (events per second of the whole init), the CPU time of the command itself
(the fetch and the checkout, its checkout helper included) and of B's daemon until it
listened (its start and first rebuild): what a busy machine changes least; the peak RSS
of B's daemon and the last progress line the terminal showed; then the medians.
"""

from __future__ import annotations

import argparse
import os
import pty
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import pygit2  # noqa: E402

from bench_segments import Signing  # noqa: E402
from bench_sync import ENV, Gen, clone, make_remote, rss_mib, step, wait_for_detached_repacks  # noqa: E402


def thrum_command() -> list[str]:
    """The installed ``thrum`` next to this interpreter (the venv's), else the entry point."""
    exe = Path(sys.executable).parent / "thrum"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from thrum.cli.entry import main; sys.exit(main())"]


def prepare(base: Path, events: int, agents: int, reuse: bool) -> Path:
    """The bare remote holding the history (made once; kept with ``--reuse``)."""
    from thrum import lifecycle
    from thrum.sync.offline import run_offline
    from thrum.sync.worktree import sync_worktree_path

    remote, a_dir, done = base / "remote.git", base / "a", base / "remote.ready"
    if reuse and done.exists() and done.read_text().strip() == str(events):
        step(f"reusing the remote in {base} ({events:,} events)")
        return remote
    shutil.rmtree(remote, ignore_errors=True)
    shutil.rmtree(remote.with_name(remote.stem + "-main-alone.git"), ignore_errors=True)
    shutil.rmtree(a_dir, ignore_errors=True)
    done.unlink(missing_ok=True)
    make_remote(remote)
    clone(remote, a_dir)
    pa = lifecycle.init_repo(a_dir, start_daemon=False)
    gen = Gen(Signing(pa.identities))
    wt = sync_worktree_path(a_dir)
    names = [f"agent_{i:02d}" for i in range(agents)]
    t = time.perf_counter()
    gen.lifecycle_into(wt, names)
    gen.messages(wt, names, names, events)
    size = sum(p.stat().st_size for p in wt.rglob("*.jsonl"))
    step(f"wrote {events:,} events ({size / 2**20:,.0f} MiB) in {time.perf_counter() - t:.0f} s")
    t = time.perf_counter()
    report = run_offline(pa)
    assert report.get("pushed"), report
    step(f"A pushed the history (offline cycle, no daemon) in {time.perf_counter() - t:.0f} s")
    wait_for_detached_repacks()  # its full repack of the remote (a child it left) ends before A goes
    shutil.rmtree(a_dir, ignore_errors=True)  # A's part is done: only the remote is needed
    done.write_text(f"{events}\n")
    return remote


def clone_main_only(remote: Path, dest: Path, *, without_history: bool = False) -> None:
    """A clone of ``main`` alone (``git clone --single-branch``): `thrum init` fetches ``a-sync``.

    ``without_history``: cloned from a bare copy of ``main``'s objects alone (made once beside
    the remote), then pointed at the remote, so that none of the history's objects is there.
    """

    def only_main(repo: pygit2.Repository, name: str, url: str) -> pygit2.Remote:
        return repo.remotes.create(name, url, "+refs/heads/main:refs/remotes/origin/main")

    source = _main_alone(remote) if without_history else remote
    repo = pygit2.clone_repository(str(source), str(dest), remote=only_main)
    repo.remotes.set_url("origin", str(remote))
    repo.config["user.name"] = "bench"
    repo.config["user.email"] = "bench@example.invalid"


def _main_alone(remote: Path) -> Path:
    """A bare repository beside ``remote`` holding its ``main`` (commit, tree, blobs) and nothing else."""
    copy = remote.with_name(remote.stem + "-main-alone.git")
    if copy.exists():
        return copy
    src = pygit2.Repository(str(remote))
    dst = pygit2.init_repository(str(copy) + ".tmp", bare=True, initial_head="main")
    tip = src.references["refs/heads/main"].peel(pygit2.Commit)
    todo: list[pygit2.Oid] = [tip.id, tip.tree_id]
    while todo:
        oid = todo.pop()
        kind, data = src.odb.read(oid)
        dst.odb.write(kind, data)
        if kind == pygit2.enums.ObjectType.TREE:
            todo += [entry.id for entry in src[oid]]
    dst.references.create("refs/heads/main", tip.id)
    os.replace(str(copy) + ".tmp", copy)
    return copy


def run_init(repo: Path, tty: bool) -> tuple[int, str, str]:
    """``thrum init --non-interactive`` in ``repo``; (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("THRUM_")}
    env.update(ENV)
    cmd = thrum_command() + ["init", "--non-interactive"]
    if not tty:
        out = subprocess.run(cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=3600)
        return out.returncode, out.stdout.decode(), out.stderr.decode(errors="replace")
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    finally:
        os.close(slave)
    err = b""
    while True:  # drain the terminal while the command runs (a full pty would block it)
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other end is closed and drained
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    out = proc.stdout.read() if proc.stdout else b""
    return proc.wait(timeout=3600), out.decode(), err.decode(errors="replace")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a live process (B's daemon is not our child), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, TypeError, ValueError, IndexError):
        return float("nan")


def one_machine(remote: Path, base: Path, n: int, tty: bool, events: int, fetch: bool = False) -> dict:
    from thrum import lifecycle
    from thrum.paths import resolve

    b_dir = base / f"b{n}"
    shutil.rmtree(b_dir, ignore_errors=True)
    t = time.perf_counter()
    clone_main_only(remote, b_dir, without_history=fetch)
    cloned = time.perf_counter() - t
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code, out, err = run_init(b_dir, tty)
    init = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise SystemExit(f"thrum init failed ({code}):\n{out}\n{err[-3000:]}")
    paths = resolve(b_dir)
    pid = lifecycle.read_pid(paths)
    daemon_cpu = cpu_seconds(pid)
    peak = rss_mib(pid)
    own = rss_mib(pid, "RssAnon")
    lifecycle.stop(paths)
    shutil.rmtree(b_dir, ignore_errors=True)
    shown = [part.strip() for part in err.replace("\x1b[K", "").split("\r") if part.strip()]
    return {
        "clone": cloned,
        "init": init,
        "init_cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
        "daemon_cpu": daemon_cpu,
        "rate": events / init,
        "peak_mib": peak,
        "own_mib": own,
        "updates": sum("building the projection" in s for s in shown),
        "last": shown[-1].splitlines()[0] if shown else "",
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000, help="message events in the remote's history")
    p.add_argument("--agents", type=int, default=50, help="agents (message streams) in the history")
    p.add_argument("--runs", type=int, default=3, help="machines that attach, one after the other")
    p.add_argument("--base", help="work here (kept) instead of a temp dir")
    p.add_argument("--reuse", action="store_true", help="reuse the remote already made in --base")
    p.add_argument("--no-tty", action="store_true", help="stderr on a pipe: the quiet path")
    p.add_argument("--fetch", action="store_true", help="B holds none of the history: thrum init fetches it all")
    args = p.parse_args(argv)
    for k in ("THRUM_NAME", "THRUM_ROLE", "THRUM_MODULE", "THRUM_LOCAL"):
        os.environ.pop(k, None)
    os.environ.update(ENV)
    base = Path(args.base) if args.base else Path(tempfile.mkdtemp(prefix="thrum-bench-attach-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        remote = prepare(base, args.events, args.agents, args.reuse)
        runs = []
        for n in range(args.runs):
            r = one_machine(remote, base, n, not args.no_tty, args.events, args.fetch)
            runs.append(r)
            step(
                f"run {n + 1}: clone (main only) {r['clone']:.1f} s, thrum init {r['init']:.1f} s "
                f"({r['rate']:,.0f} events/s; CPU: the command {r['init_cpu']:.1f} s, B's daemon until it "
                f"listened {r['daemon_cpu']:.1f} s), B daemon peak RSS {r['peak_mib']:,.0f} MiB "
                f"(own {r['own_mib']:,.0f}), {r['updates']} progress updates; last: {r['last']!r}"
            )
        init = statistics.median(r["init"] for r in runs)
        print(
            f"\nthrum init attaching to a {args.events:,}-event remote, median of {args.runs} "
            f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs):"
        )
        print(f"  clone of main only       {statistics.median(r['clone'] for r in runs):8.1f} s")
        fetched = "the whole history fetched" if args.fetch else "the history's objects already cloned"
        print(f"  thrum init (fetch, checkout, first rebuild, daemon listening) {init:8.1f} s  target <= 30 s")
        print(f"    ({fetched})")
        print(f"  rate of the whole init   {args.events / init:8,.0f} events/s")
        print(f"  CPU of the command (fetch, checkout) {statistics.median(r['init_cpu'] for r in runs):8.1f} s")
        print(f"  CPU of B's daemon until it listened  {statistics.median(r['daemon_cpu'] for r in runs):8.1f} s")
        print(f"  B daemon peak RSS        {max(r['peak_mib'] for r in runs):8,.0f} MiB")
    finally:
        if not args.base:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The receiving fold, in-process: CPU time of what `Writer.apply_remote` does with a
received chunk (decode, trust check, fold), and of a local send's one-event fold.

Usage:
    python scripts/bench_fold.py build DIR [--base N] [--shape all|new]
    python scripts/bench_fold.py run DIR [--runs R] [--sends S] [--whole] [--no-autocheckpoint]
                                         [--profile FILE --profile-what receive|send]

``build`` writes a history of N message.create events (default 100,000) over 50 agents
the way `bench_sync` does (`bench_segments`: signed, chained, sealed per segment), folds
it into a projection (what a replica holds before the receive), then appends the
received chunk: "all" (bench_sync's "all streams": 200 events on each of the 50
streams) or "new" (10 new agents x 1,000 events, their registrations in the events
stream), and S local sends (each one event of agent_00, extending its chain). It keeps
the received lines per segment, in the chunks the merge hands over (`treemerge`: at
most 256 files and about 4 MiB each).

``run`` copies the projection afresh for each run and measures the process's CPU time
(`time.process_time`) of `EventLog.decode` + `VerifiedFold.received` over those chunks,
as the sync thread's `apply_remote` calls them (the files are already in place; their
end positions are read as it reads them), then of folding the S sends one by one
(`projection.fold` of a one-event batch, as `Writer._fold_appended` does). Per run:
one line, the receive split into decode, trust check (`Verifier.check`) and fold
(`projection.fold`, its commit included); the medians at the end. Compare two trees by running their own copies of this
script on their own builds, interleaved (the lead's quiet confirmation:
scripts/bench_sync.py --events 1000000 --runs 3 --big-runs 3).
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import sqlite3
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


from bench_segments import Signing  # noqa: E402
from bench_sync import Gen  # noqa: E402
from thrum import events as ev  # noqa: E402
from thrum.store.database import open_database  # noqa: E402
from thrum.store.log import EventLog  # noqa: E402
from thrum.store import projection  # noqa: E402
from thrum.store.verified import VerifiedFold  # noqa: E402
from thrum.trust.keys import LocalKeys  # noqa: E402
from thrum.trust.ring import KeyRing  # noqa: E402
from thrum.trust.verdicts import VerdictMemory  # noqa: E402
from thrum.trust.verify import Verifier  # noqa: E402

CHUNK_FILES = 256
CHUNK_BYTES = 4 * 2**20


def make_fold(base: Path, known: Path) -> VerifiedFold:
    ring = KeyRing(known, LocalKeys(base / "own-identities"))  # a replica with identities of its own
    return VerifiedFold(Verifier(ring, skew_s=600.0), VerdictMemory(base / "verified-lines"))


def sizes(wt: Path) -> dict[str, int]:
    return {str(p.relative_to(wt)): p.stat().st_size for p in wt.rglob("*.jsonl")}


def build(args) -> None:
    base = Path(args.dir)
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    wt = base / "wt"
    wt.mkdir()
    agents = [f"agent_{i:02d}" for i in range(args.agents)]
    gen = Gen(Signing(base / "identities"))
    t = time.process_time()
    gen.lifecycle_into(wt, agents)
    gen.messages(wt, agents, agents, args.base)
    print(f"history of {args.base:,} events written in {time.process_time() - t:.1f} s CPU", flush=True)
    t = time.process_time()
    fold = make_fold(base, base / "known.json")
    db = projection.open_projection(base / "view.sqlite", EventLog(wt), fold).db
    db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    print(f"folded in {time.process_time() - t:.1f} s CPU", flush=True)
    before = sizes(wt)
    if args.shape == "new":
        new = [f"new_{i:02d}" for i in range(10)]
        gen.lifecycle_into(wt, new)
        gen.messages(wt, new, agents, args.chunk)
    else:
        gen.messages(wt, agents, agents, args.chunk)
    after = sizes(wt)
    received: dict[str, list[bytes]] = {}
    for shard in sorted(after):  # the merge's order: changed paths in tree order
        at = before.get(shard, 0)
        if after[shard] > at:
            with open(wt / shard, "rb") as f:
                f.seek(at)
                received[shard] = f.read().splitlines(keepends=True)
    chunks: list[dict[str, list[bytes]]] = [{}]
    n = size = 0
    for shard, lines in received.items():
        chunks[-1][shard] = lines
        n += 1
        size += after[shard]
        if n >= CHUNK_FILES or size >= CHUNK_BYTES:
            chunks.append({})
            n = size = 0
    chunks = [c for c in chunks if c]
    sends = []
    for _ in range(args.sends):
        line = gen.message("agent_00", agents, ev.now_rfc3339())
        sends.append(ev.decode_line(line.rstrip(b"\n")))
    with open(base / "chunk.pickle", "wb") as f:
        pickle.dump({"chunks": chunks, "sends": sends}, f)
    lines = sum(len(v) for v in received.values())
    print(f"received: {lines:,} lines in {len(received)} segments, {len(chunks)} merge chunks; {len(sends)} sends")


def fresh_db(base: Path, run: Path):
    if run.exists():
        shutil.rmtree(run)
    run.mkdir()
    src = sqlite3.connect(base / "view.sqlite")
    dst = sqlite3.connect(run / "view.sqlite")
    src.backup(dst)
    src.close()
    dst.close()
    shutil.copy(base / "known.json", run / "known.json")
    return open_database(run / "view.sqlite")


def run(args) -> None:
    base = Path(args.dir)
    with open(base / "chunk.pickle", "rb") as f:
        data = pickle.load(f)
    chunks, sends = data["chunks"], data["sends"][: args.sends]
    if args.whole:  # one fold for the whole chunk (what a merge in one piece would hand over)
        chunks = [{shard: lines for c in chunks for shard, lines in c.items()}]
    event_log = EventLog(base / "wt")
    recv, per_send = [], []
    paused = getattr(projection, "collector_paused", nullcontext)  # (trees before it: the collector runs)
    stages: dict[str, list[float]] = {"decode": [], "check": [], "fold": []}
    spent: dict[str, float] = {}

    def timed(name, fn):
        def wrapper(*a, **kw):
            t = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - t

        return wrapper

    import thrum.store.verified as verified_mod

    verified_mod.projection = SimpleNamespace(**{**vars(projection), "fold": timed("fold", projection.fold)})
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
    for r in range(args.runs):
        work = base / f"run{os.getpid()}"
        db = fresh_db(base, work)
        fold = make_fold(work, work / "known.json")
        fold.verifier.check = timed("check", fold.verifier.check)
        spent.clear()
        db.execute_sql("SELECT count(*) FROM messages").fetchone()  # the file opened, as a serving daemon's
        if args.no_autocheckpoint:  # what the commits cost without SQLite's checkpoints among them
            db.execute_sql("PRAGMA wal_autocheckpoint=0")
        applied = 0
        if prof and args.profile_what == "receive":
            prof.enable()
        t = time.process_time()
        for received in chunks:
            positions = {}
            for shard in received:
                positions[shard] = event_log.end_position(shard)
            with paused():  # as this tree's Writer.apply_remote does
                read = timed("decode", event_log.decode)(received)
                result = fold.received(db, read.records, read.lines, issues=read.issues, positions=positions)
            applied += len(result.applied)
        dt = time.process_time() - t
        if prof:
            prof.disable()
        recv.append(dt)
        for name, values in stages.items():
            values.append(spent.get(name, 0.0))
        if prof and args.profile_what == "send":
            prof.enable()
        t = time.process_time()
        for d in sends:
            shard = ev.segment_path("messages/agent_00", 999)
            projection.fold(db, [(shard, d)])
        ds = (time.process_time() - t) / max(1, len(sends))
        if prof:
            prof.disable()
        per_send.append(ds)
        rows = db.execute_sql("SELECT count(*) FROM messages").fetchone()[0]
        db.close()
        shutil.rmtree(work)
        parts = ", ".join(f"{name} {values[-1] * 1000:.1f}" for name, values in stages.items())
        print(
            f"run {r}: receive {dt * 1000:7.1f} ms CPU ({parts}; {applied:,} applied, {rows:,} messages); "
            f"send fold {ds * 1e6:6.1f} us CPU",
            flush=True,
        )
    parts = ", ".join(f"{name} {statistics.median(values) * 1000:.1f}" for name, values in stages.items())
    print(
        f"median: receive {statistics.median(recv) * 1000:.1f} ms CPU ({parts}); "
        f"send fold {statistics.median(per_send) * 1e6:.1f} us CPU"
    )
    if prof:
        prof.dump_stats(args.profile)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("dir")
    b.add_argument("--base", type=int, default=100_000)
    b.add_argument("--chunk", type=int, default=10_000)
    b.add_argument("--agents", type=int, default=50)
    b.add_argument("--shape", choices=["all", "new"], default="all")
    b.add_argument("--sends", type=int, default=300)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--runs", type=int, default=3)
    r.add_argument("--sends", type=int, default=300)
    r.add_argument("--profile")
    r.add_argument("--whole", action="store_true", help="fold the received lines in one call, not per merge chunk")
    r.add_argument("--no-autocheckpoint", action="store_true", help="PRAGMA wal_autocheckpoint=0 on the projection")
    r.add_argument("--profile-what", choices=["receive", "send"], default="receive")
    args = ap.parse_args(argv)
    build(args) if args.cmd == "build" else run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

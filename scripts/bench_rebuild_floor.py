#!/usr/bin/env python3
"""The floor under a projection rebuild (issue 29): what SQLite's own work costs once the
rows exist, with no Python per event.

A rebuild's time is Python per line (read, decode, trust check, the fold's row building)
plus SQLite's work (inserting the rows, then the query indexes, counters and search index).
This measures the second part alone, on the projection's real schema and settings:

1. the log is folded once, as the daemon's rebuild does, into WORK/loaded.db (kept and
   reused: the rows after the load, before the finishing steps);
2. every table's rows are read back into memory as ready tuples, then inserted into a
   fresh schema with the rebuild's load settings (`executemany`, 50,000 rows a call):
   CPU and wall per table;
3. the finishing steps (`database.finish_schema`) run on that copy with the rebuild's
   finishing settings: CPU and wall per step;
4. every line of the log is decoded as bare JSON (msgspec, no validation): the least any
   reader pays per line.

No implementation of this schema in this process can rebuild faster than (2) + (3) + (4) on
one core, nor faster than the larger of its parts spread over two.

With ``--checks``, the work every line of an untrusted log must get on top, whatever the
code around it, is measured too, and the floor is taken with it instead of (4):

5. reading and decoding with validation (`EventLog.read_shard`: the schema in C, the same
   batches as the rebuild);
6. the trust check of each batch (`VerifiedFold`'s judging: signatures through seals,
   message ids bound to keys, digests), with the verdict memory (the daemon's rebuild) and
   without it (a first rebuild: `thrum init`);
7. the least Python a row can cost: one C call per row turning a decoded dict into the
   table's tuple (`operator.itemgetter`), for every row the load inserts.

Usage (the log and the verdict memory as `bench_rebuild.py` makes them):

    python scripts/bench_rebuild.py --data-dir /tmp/rb --events 1000000 --runs 1
    python scripts/bench_rebuild_floor.py --data-dir /tmp/rb --work /tmp/rb-floor [--checks]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 50_000


def load_once(data: Path, loaded: Path) -> None:
    """Fold the log into ``loaded`` as a rebuild's load does (trust check with the verdict
    memory, chains settled), without its finishing steps."""
    from thrum.events.ids import now_rfc3339
    from thrum.store import chain_fold, database
    from thrum.store import rebuild as rb
    from thrum.store.log import EventLog
    from thrum.store.verified import VerifiedFold
    from thrum.trust.ring import KeyRing
    from thrum.trust.verdicts import VerdictMemory
    from thrum.trust.verify import Verifier

    db = database.open_database(str(loaded))
    database.drop_schema(db)
    database.create_tables(db)
    fold_fn = VerifiedFold(Verifier(KeyRing(None, None)), VerdictMemory(data / "verified-lines"))
    t = time.process_time()
    with rb._pragmas(db, rb.LOAD_PRAGMAS), rb.collector_paused():
        with chain_fold.deferred():
            rb._fold_log(db, EventLog(data / "log"), {}, keep_applied=False, fold_fn=fold_fn)
        with db.atomic():
            chain_fold.settle(db.connection(), now_rfc3339())
    db.close()
    print(f"the load as the rebuild does it (Python and SQLite): {time.process_time() - t:.2f} s CPU")


def table_rows(loaded: Path) -> dict[str, tuple[list[str], list[tuple]]]:
    from thrum.store import database

    db = database.open_database(str(loaded))
    c = db.connection()
    rows = {}
    names = c.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE '%VIRTUAL%'"
    )
    for (name,) in names.fetchall():
        cols = [r[1] for r in c.execute(f"PRAGMA table_info({name})")]
        found = c.execute(f"SELECT {','.join(cols)} FROM {name}").fetchall()
        if found:
            rows[name] = (cols, found)
    db.close()
    return rows


def insert_all(rows: dict[str, tuple[list[str], list[tuple]]], target: Path) -> dict[str, tuple[float, float]]:
    from thrum.store import database
    from thrum.store import rebuild as rb

    db = database.open_database(str(target))
    database.drop_schema(db)
    database.create_tables(db)
    c = db.connection()
    spent: dict[str, tuple[float, float]] = {}
    with rb._pragmas(db, rb.LOAD_PRAGMAS), db.atomic():
        for name, (cols, found) in rows.items():
            sql = f"INSERT INTO {name}({','.join(cols)}) VALUES ({','.join('?' * len(cols))})"
            cpu, wall = time.process_time(), time.perf_counter()
            for i in range(0, len(found), CHUNK):
                c.executemany(sql, found[i : i + CHUNK])
            spent[name] = (time.process_time() - cpu, time.perf_counter() - wall)
    db.close()
    return spent


def finish(target: Path) -> tuple[float, float, dict[str, float]]:
    from thrum.store import database
    from thrum.store import rebuild as rb

    db = database.open_database(str(target))
    timings: dict[str, float] = {}
    cpu, wall = time.process_time(), time.perf_counter()
    with rb._pragmas(db, rb.FINISH_PRAGMAS):
        database.finish_schema(db, compute_counters=True, timings=timings)
    spent = (time.process_time() - cpu, time.perf_counter() - wall)
    db.close()
    return spent[0], spent[1], timings


def bare_decode(data: Path) -> tuple[int, float]:
    import msgspec

    decoder = msgspec.json.Decoder()
    lines, cpu = 0, time.process_time()
    for path in sorted((data / "log").rglob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            if line:
                decoder.decode(line)
                lines += 1
    return lines, time.process_time() - cpu


def read_and_judge(data: Path, memory: bool) -> tuple[int, float, float]:
    """(5) and (6): the log read and decoded with validation in the rebuild's batches, each
    batch judged by a fresh verifier as a rebuild's is (``memory``: with the verdict memory).
    Returns (lines, CPU of reading and decoding, CPU of judging)."""
    from thrum.store import rebuild as rb
    from thrum.store import readahead
    from thrum.store.log import EventLog
    from thrum.store.verified import VerifiedFold
    from thrum.trust.ring import KeyRing
    from thrum.trust.verdicts import VerdictMemory
    from thrum.trust.verify import Verifier

    fold_fn = VerifiedFold(Verifier(KeyRing(None, None)), VerdictMemory(data / "verified-lines" if memory else None))
    judge = fold_fn.judge_ahead()
    batches = readahead.log_batches(
        EventLog(data / "log"),
        {},
        batch_events=rb.REBUILD_BATCH,
        batch_bytes=rb.REBUILD_BATCH_BYTES,
        chunk=rb.READ_CHUNK,
    )
    lines, read_cpu, judge_cpu = 0, 0.0, 0.0
    while True:
        t = time.process_time()
        batch = next(batches, None)
        read_cpu += time.process_time() - t
        if batch is None:
            break
        t = time.process_time()
        judge(batch.result.records, batch.result.lines)
        judge_cpu += time.process_time() - t
        lines += len(batch.result.lines)
    fold_fn.release()
    return lines, read_cpu, judge_cpu


def rows_from_dicts(rows: dict[str, tuple[list[str], list[tuple]]]) -> float:
    """(7): CPU of one C call per row (`operator.itemgetter`) from a dict to the row's tuple,
    over every row the load inserts (the dicts are made first, untimed, a table at a time)."""
    from operator import itemgetter

    cpu = 0.0
    for cols, found in rows.values():
        get = itemgetter(*cols)
        for i in range(0, len(found), CHUNK):
            dicts = [dict(zip(cols, row)) for row in found[i : i + CHUNK]]
            t = time.process_time()
            [get(d) for d in dicts]
            cpu += time.process_time() - t
    return cpu


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True, help="the log and verdict memory (bench_rebuild.py's --data-dir)")
    p.add_argument("--work", required=True, help="where the loaded database is kept and the copy is made")
    p.add_argument(
        "--checks", action="store_true", help="add the work every untrusted line needs (reads the log 3 times)"
    )
    p.add_argument("--src", default=str(ROOT), help="the checkout whose thrum is measured (default: this one)")
    args = p.parse_args(argv)
    sys.path.insert(0, args.src)
    from thrum.daemon.limits import tune_allocator

    tune_allocator()
    data, work = Path(args.data_dir), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    loaded, target = work / "loaded.db", work / "copy.db"
    if not loaded.exists():
        load_once(data, loaded)
    rows = table_rows(loaded)
    for old in work.glob("copy.db*"):
        old.unlink()
    inserted = insert_all(rows, target)
    fin_cpu, fin_wall, timings = finish(target)
    lines, decode_cpu = bare_decode(data)
    checks = None
    if args.checks:
        from thrum.store.rebuild import collector_paused

        with collector_paused():  # as in a rebuild: millions of young dicts are no garbage
            _, read_cpu, first_cpu = read_and_judge(data, memory=False)
            _, _, remembered_cpu = read_and_judge(data, memory=True)
            checks = (read_cpu, first_cpu, remembered_cpu, rows_from_dicts(rows))
    for old in work.glob("copy.db*"):
        old.unlink()

    print(f"\nSQLite's own work for a rebuild of {lines:,} lines (rows ready, no Python per event):")
    print(f"{'step':<34}{'rows':>12}{'CPU s':>9}{'wall s':>9}")
    for name, (cpu, wall) in sorted(inserted.items(), key=lambda kv: -kv[1][0]):
        if cpu >= 0.05:
            print(f"{'insert ' + name:<34}{len(rows[name][1]):>12,}{cpu:>9.2f}{wall:>9.2f}")
    ins_cpu = sum(v[0] for v in inserted.values())
    ins_wall = sum(v[1] for v in inserted.values())
    print(f"{'inserts, all tables':<34}{'':>12}{ins_cpu:>9.2f}{ins_wall:>9.2f}")
    for key in ("indexes_and_counters", "search_index"):
        print(f"{'finish: ' + key:<34}{'':>12}{timings.get('cpu ' + key, 0):>9.2f}{timings.get(key, 0):>9.2f}")
    print(f"{'finishing steps, all':<34}{'':>12}{fin_cpu:>9.2f}{fin_wall:>9.2f}")
    print(f"{'bare JSON decode of every line':<34}{lines:>12,}{decode_cpu:>9.2f}")
    floor = ins_cpu + fin_cpu + decode_cpu
    print(f"\nfloor on one core: {floor:.1f} s CPU = {lines / floor:,.0f} events/s")
    print(f"floor split perfectly over two cores: {floor / 2:.1f} s = {2 * lines / floor:,.0f} events/s")
    if checks is not None:
        read_cpu, first_cpu, remembered_cpu, rows_cpu = checks
        print("\nThe work every untrusted line needs besides SQLite's (CPU s):")
        print(f"{'read + decode with validation':<44}{read_cpu:>9.2f}")
        print(f"{'trust check, with the verdict memory':<44}{remembered_cpu:>9.2f}")
        print(f"{'trust check, without it (a first rebuild)':<44}{first_cpu:>9.2f}")
        print(f"{'rows from dicts, one C call a row':<44}{rows_cpu:>9.2f}")
        base = ins_cpu + fin_cpu + read_cpu + rows_cpu
        print(f"\n{'floor with the checks':<44}{'one core':>10}{'two cores':>11}{'events/s':>10}")
        for name, judge in (
            ("the daemon's rebuild (remembered)", remembered_cpu),
            ("a first rebuild (thrum init)", first_cpu),
        ):
            total = base + judge
            print(f"{name:<44}{total:>10.1f}{total / 2:>11.1f}{2 * lines / total:>10,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

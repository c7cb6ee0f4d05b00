#!/usr/bin/env python3
"""thrum benchmarks: plain Python, prints a table per section.

Usage:
    python scripts/bench.py [SECTION ...] [options]
    python scripts/bench.py --list

Sections are named; later issues add their own (register them in SECTIONS).
With no section named, every section runs.

daemon, sync, realtime, ui, gcmail, mcp, soak: see scripts/bench_daemon.py, bench_sync.py (+ bench_remotes.py),
bench_realtime.py, bench_ui.py, bench_gcmail.py, bench_mcp.py, bench_soak.py (``soak --minutes N``: honest load,
syncs and an abusive client for N minutes).

store: generates a log of N message events (default 1,000,000) over 50 agents
       (10 roles, 4 groups, mentions of agents/roles/groups/everyone, scopes,
       threads, replies, ~1% edits, ~0.5% deletes, receipts) by writing JSONL
       lines directly, then measures rebuild rate, the inbox query latency
       ("unread messages mentioning role X for agent Y, page of 50") and peak
       memory.
"""

from __future__ import annotations

import argparse
import base64
import gc
import multiprocessing
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from thrum.store import database, projection, queries  # noqa: E402

try:  # issue 26: a build without search (an older checkout, for "before" figures) skips its rows
    from thrum.search_query import parse as parse_query  # noqa: E402
    from thrum.store.search import search_messages  # noqa: E402

    HAVE_SEARCH = True
except ImportError:
    HAVE_SEARCH = False
from thrum.store.log import EventLog  # noqa: E402
from thrum.store.verified import VerifiedFold  # noqa: E402
from thrum.trust.ring import KeyRing  # noqa: E402
from thrum.trust.verdicts import VerdictMemory  # noqa: E402
from thrum.trust.verify import Verifier  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from bench_segments import SegmentWriter, Signing  # noqa: E402
from bench_text import FUNCTION_WORDS, BodyText  # noqa: E402

# --------------------------------------------------------------------------- helpers

_CROCKFORD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", b"0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def ulid(ms: int, rand: int) -> str:
    """A ULID string from a millisecond timestamp and an 80-bit number (fast, no library)."""
    value = ((ms << 80) | (rand & ((1 << 80) - 1))) << 6  # 130 significant bits, left-aligned in 136
    return base64.b32encode(value.to_bytes(17, "big")).translate(_CROCKFORD)[:26].decode()


def rfc3339(ms: int) -> str:
    secs, rem = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rem:03d}Z"


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1))))
    return ordered[k]


def print_table(title: str, rows: list[tuple[str, str, str]]) -> None:
    w1 = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    print(f"\n{title}")
    print(f"  {'metric'.ljust(w1)}  {'value'.rjust(w2)}  target")
    print(f"  {'-' * w1}  {'-' * w2}  ------")
    for name, value, target in rows:
        print(f"  {name.ljust(w1)}  {value.rjust(w2)}  {target}")


# --------------------------------------------------------------------------- store: generation

ROLES = [
    "implementer",
    "reviewer",
    "tester",
    "planner",
    "coordinator",
    "docs",
    "security",
    "release",
    "ops",
    "research",
]
GROUPS = {  # name -> (agent members by index, role members)
    "backend": ([3, 17], ["implementer", "reviewer"]),
    "frontend": ([5, 22, 41], ["tester"]),
    "leads": ([0, 10, 20, 30, 40], []),
    "oncall": ([8, 9], ["ops", "security"]),
}
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def generate_store_log(root: Path, n_messages: int, seed: int = 7) -> dict:
    """Write a realistic log under ``root``; returns counts of what was written.

    Every line is signed by its author and each segment sealed, as the daemon writes
    them (issue 8); the agents' keys are kept in ``root/../identities``.
    """
    rng = random.Random(seed)
    body_text = BodyText(seed)  # its own generator: the words (bench_text.py), not the log's shape
    agents = [f"{ROLES[i % len(ROLES)]}_{i:02d}" for i in range(50)]
    role_of = {a: ROLES[i % len(ROLES)] for i, a in enumerate(agents)}
    signer = Signing(root.parent / "identities")
    keys = {a: signer.keys.create(a) for a in agents}
    signer.pairs.update(keys)

    def dumps(event: dict) -> bytes:
        return orjson.dumps(signer.sign(event))

    sessions = {a: "ses_" + ulid(BASE_MS - 10_000, rng.getrandbits(80)) for a in agents}
    counter = 0

    def next_ids(ms: int) -> str:
        nonlocal counter
        counter += 1
        return ulid(ms, (counter << 40) | rng.getrandbits(40))

    (root / "messages").mkdir(parents=True, exist_ok=True)
    (root / "receipts").mkdir(parents=True, exist_ok=True)
    lifecycle = []
    t0 = BASE_MS - 60_000
    for a in agents:
        lifecycle.append(
            {
                "type": "agent.register",
                "timestamp": rfc3339(t0),
                "event_id": next_ids(t0),
                "v": 1,
                "agent_id": a,
                "kind": "agent",
                "name": a,
                "role": role_of[a],
                "module": "core",
                "worktree": "main",
                "display": a.replace("_", " ").title(),
                "public_key": keys[a][1].b64,
            }
        )
        lifecycle.append(
            {
                "type": "agent.session.start",
                "timestamp": rfc3339(t0 + 1),
                "event_id": next_ids(t0 + 1),
                "v": 1,
                "session_id": sessions[a],
                "agent_id": a,
            }
        )
    group_targets: dict[str, set[str]] = {}
    for g, (members, roles) in GROUPS.items():
        lifecycle.append(
            {
                "type": "group.create",
                "timestamp": rfc3339(t0 + 2),
                "event_id": next_ids(t0 + 2),
                "v": 1,
                "group_id": "grp_" + next_ids(t0 + 2),
                "name": g,
                "description": f"{g} team",
                "created_by": agents[0],
            }
        )
        expanded = set()
        for i in members:
            lifecycle.append(
                {
                    "type": "group.member.add",
                    "timestamp": rfc3339(t0 + 3),
                    "event_id": next_ids(t0 + 3),
                    "v": 1,
                    "group": g,
                    "member_type": "agent",
                    "member_value": agents[i],
                    "agent_id": agents[0],
                }
            )
            expanded.add(agents[i])
        for r in roles:
            lifecycle.append(
                {
                    "type": "group.member.add",
                    "timestamp": rfc3339(t0 + 3),
                    "event_id": next_ids(t0 + 3),
                    "v": 1,
                    "group": g,
                    "member_type": "role",
                    "member_value": r,
                    "agent_id": agents[0],
                }
            )
            expanded.update(a for a in agents if role_of[a] == r)
        group_targets[g] = expanded
    segments = SegmentWriter(root, signing=signer)
    segments.append("events", [dumps(e) + b"\n" for e in lifecycle])

    # who does a mention value reach (for generating realistic receipts)
    reach: dict[str, list[int]] = {a: [] for a in agents}
    per_agent: dict[str, bytearray] = {a: bytearray() for a in agents}  # (orjson's bytes over-allocate)
    created: list[tuple[str, str]] = []  # (message_id, author)
    threads = [f"thr_{next_ids(BASE_MS)}" for _ in range(5000)]
    group_names = list(GROUPS)
    n_edits = n_deletes = 0
    ms = BASE_MS
    for _ in range(n_messages):
        ms += rng.randint(1, 9_000)
        author = agents[rng.randrange(50)]
        r = rng.random()
        if r < 0.45:
            mentions = [agents[rng.randrange(50)]]
        elif r < 0.72:
            mentions = [rng.choice(ROLES)]
        elif r < 0.80:
            mentions = [rng.choice(group_names)]
        elif r < 0.82:
            mentions = ["everyone"]
        elif r < 0.90:
            mentions = [rng.choice(ROLES), agents[rng.randrange(50)]]
        else:
            mentions = []
        refs = [{"type": "mention", "value": m} for m in mentions if m != author]
        if rng.random() < 0.08:
            refs.append({"type": "issue", "value": f"thrum-{rng.randrange(2000)}"})
        if created and rng.random() < 0.05:
            refs.append({"type": "reply_to", "value": created[-rng.randint(1, min(50, len(created)))][0]})
        scopes = []
        if rng.random() < 0.3:
            scopes.append({"type": "module", "value": f"mod{rng.randrange(20)}"})
        ts = rfc3339(ms)
        mid = signer.message_id(author)
        text = body_text.body(rng.randint(8, 30))
        ev = {
            "type": "message.create",
            "timestamp": ts,
            "event_id": next_ids(ms),
            "v": 1,
            "message_id": mid,
            "thread_id": threads[rng.randrange(5000)] if rng.random() < 0.2 else "",
            "agent_id": author,
            "session_id": sessions[author],
            "body": {"format": "markdown", "content": text, "structured": ""},
            "scopes": scopes,
            "refs": refs,
            "priority": "normal",
            "authored_by": "",
            "disclosed": False,
        }
        per_agent[author] += dumps(ev) + b"\n"
        created.append((mid, author))
        idx = len(created) - 1
        for m in {x["value"] for x in refs if x["type"] == "mention"}:
            if m in reach:
                reach[m].append(idx)
            elif m in group_targets:
                for a in group_targets[m]:
                    reach[a].append(idx)
            elif m == "everyone":
                for a in agents:
                    reach[a].append(idx)
            else:  # a role
                for a in agents:
                    if role_of[a] == m:
                        reach[a].append(idx)
        # occasional edit / delete of a recent own message
        e = rng.random()
        if e < 0.01:
            ms += 1
            per_agent[author] += (
                dumps(
                    {
                        "type": "message.edit",
                        "timestamp": rfc3339(ms),
                        "event_id": next_ids(ms),
                        "v": 1,
                        "message_id": mid,
                        "agent_id": author,
                        "session_id": sessions[author],
                        "body": {"format": "markdown", "content": text + " (edited)", "structured": ""},
                    }
                )
                + b"\n"
            )
            n_edits += 1
        elif e < 0.015:
            ms += 1
            per_agent[author] += (
                dumps(
                    {
                        "type": "message.delete",
                        "timestamp": rfc3339(ms),
                        "event_id": next_ids(ms),
                        "v": 1,
                        "message_id": mid,
                        "agent_id": author,
                        "session_id": sessions[author],
                        "reason": "obsolete",
                    }
                )
                + b"\n"
            )
            n_deletes += 1
    for a, buf in per_agent.items():
        segments.append(f"messages/{a}", bytes(buf).splitlines(keepends=True), signer=a)
    # Receipts: agents read their mentions in order but not all of them. A third of
    # the agents keep up (read all but ~5% of their mentions except the newest 300),
    # a third read about half, a third rarely read (5%).
    n_receipts = n_marks = 0
    for k, a in enumerate(agents):
        idxs = [j for j in dict.fromkeys(reach[a]) if created[j][1] != a]
        profile = k % 3
        if profile == 0:
            chosen = [j for j in idxs[:-300] if rng.random() < 0.95]
        elif profile == 1:
            chosen = [j for j in idxs if rng.random() < 0.5]
        else:
            chosen = [j for j in idxs if rng.random() < 0.05]
        lines = []
        for s in range(0, len(chosen), 100):
            ids = [created[j][0] for j in chosen[s : s + 100]]
            ms_r = BASE_MS + s  # timestamps are not used by the queries measured here
            lines.append(
                dumps(
                    {
                        "type": "message.read",
                        "timestamp": rfc3339(ms_r),
                        "event_id": next_ids(ms_r),
                        "v": 1,
                        "agent_id": a,
                        "session_id": sessions[a],
                        "message_ids": ids,
                    }
                )
            )
            n_marks += len(ids)
        n_receipts += len(lines)
        if lines:
            segments.append(f"receipts/{a}", [line + b"\n" for line in lines], signer=a)
    segments.close()
    return {
        "agents": agents,
        "role_of": role_of,
        "lifecycle": len(lifecycle),
        "creates": n_messages,
        "edits": n_edits,
        "deletes": n_deletes,
        "receipts": n_receipts,
        "marks": n_marks,
    }


# --------------------------------------------------------------------------- store: measurement


def bench_store(args) -> dict:
    base = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="thrum-bench-"))
    log_root = base / "log"
    db_path = base / "messages.db"
    try:
        if log_root.exists() and args.reuse:
            print(f"reusing log in {log_root}")
            info = None
        else:
            shutil.rmtree(log_root, ignore_errors=True)
            t = time.perf_counter()
            # in a child process, so that peak memory below is the rebuild's and the queries'
            with multiprocessing.get_context("fork").Pool(1) as pool:
                info = pool.apply(generate_store_log, (log_root, args.events))
            print(
                f"generated {info['creates']:,} creates, {info['edits']:,} edits, {info['deletes']:,} deletes, "
                f"{info['receipts']:,} receipt events ({info['marks']:,} marks) in {time.perf_counter() - t:.1f}s"
            )
        event_log = EventLog(log_root)
        total_events = sum(p.read_bytes().count(b"\n") for p in log_root.rglob("*.jsonl"))
        memory_path = base / "verified-lines"
        memory_path.unlink(missing_ok=True)
        rebuilds = {}
        cpu_s = {}  # the rebuild's own CPU time: what other processes on the machine change least
        # The same signed log folded three ways: without the trust check (the fold as it
        # was before issue 8), then as the daemon does it — first on a replica that has
        # judged nothing yet (seals verified), then again with the verdict memory that
        # first rebuild left (the usual case: `thrum daemon rebuild`, a lost database).
        for kind in ("no trust check", "trust check, first time", "trust check, remembered"):
            for p in base.glob("messages.db*"):
                p.unlink()
            db = database.open_database(db_path)
            fold_fn = None
            if kind != "no trust check":
                fold_fn = VerifiedFold(Verifier(KeyRing(None, None)), VerdictMemory(memory_path))
            gc.collect()
            t, cpu = time.perf_counter(), time.process_time()
            res = projection.rebuild(db, event_log, fold_fn=fold_fn)
            rebuilds[kind] = (time.perf_counter() - t, res)
            cpu_s[kind] = time.process_time() - cpu
            if kind != "no trust check":
                assert res.refused == 0 and res.forged == 0, f"{kind}: {res.refused} lines quarantined"
            if kind != "trust check, remembered":
                db.close()
        rebuild_s, res = rebuilds["trust check, remembered"]
        rate = total_events / rebuild_s

        agents = [
            r[0]
            for r in db.execute_sql("SELECT agent_id FROM agents WHERE role IS NOT NULL ORDER BY agent_id").fetchall()
        ]
        role_of = dict(db.execute_sql("SELECT agent_id, role FROM agents").fetchall())
        rng = random.Random(11)
        kinds = {
            "mention_role+unread": lambda a: dict(viewer=a, mention_role=role_of[a], unread_for=a, page_size=50),
            "mentions_of+unread": lambda a: dict(viewer=a, mentions_of=a, unread_for=a, page_size=50),
            "default inbox": lambda a: dict(viewer=a, exclude_author=a, page_size=50),
            "mentions page 20": lambda a: dict(viewer=a, mentions_of=a, page=20, page_size=50),
            "scope + unread": lambda a: dict(
                viewer=a,
                exclude_author=a,
                unread_for=a,
                page_size=50,
                scope={"type": "module", "value": f"mod{rng.randrange(20)}"},
            ),
            "by updated_at": lambda a: dict(viewer=a, mentions_of=a, sort_by="updated_at", page_size=50),
        }
        lat = {k: [] for k in kinds}
        sample = None
        for i in range(args.runs):
            a = agents[i % len(agents)] if i < len(agents) else rng.choice(agents)
            for kind, params in kinds.items():
                kw = params(a)
                t = time.perf_counter()
                out = queries.list_messages(db, **kw)
                lat[kind].append((time.perf_counter() - t) * 1000)
                if sample is None and kind == "mention_role+unread":
                    sample = (a, out["total"], out["unread"])
        t = time.perf_counter()
        for a in agents:
            queries.counts(db, a)
        counts_ms = (time.perf_counter() - t) * 1000 / len(agents)
        search_rows = bench_search(db, agents, args.runs) if HAVE_SEARCH else []
        db.close()
        plain_s = rebuilds["no trust check"][0]
        rows = [("events in log", f"{total_events:,}", "")]
        for kind, (secs, r) in rebuilds.items():
            rows += [
                (
                    f"rebuild, {kind}",
                    f"{secs:.1f} s ({total_events / secs:,.0f} ev/s)",
                    "" if kind == "no trust check" else f"x{secs / plain_s:.2f} (<= x1.25)",
                ),
                ("  CPU time of the rebuild", f"{cpu_s[kind]:.1f} s", ""),
                ("  of which load (decode + fold)", f"{r.timings.get('load', 0):.1f} s", ""),
                ("  of which indexes + counters", f"{r.timings.get('indexes_and_counters', 0):.1f} s", ""),
            ]
            if "search_index" in r.timings:
                rows.append(("  of which the search index", f"{r.timings['search_index']:.1f} s", ""))
        rows.append(("rebuild rate (daemon, remembered)", f"{rate:,.0f} ev/s", ">= 100,000 ev/s"))
        for kind, values in lat.items():
            hot = kind in ("mention_role+unread", "mentions_of+unread")
            rows.append((f"{kind} p50", f"{statistics.median(values):.2f} ms", "<= 5 ms" if hot else ""))
            rows.append((f"{kind} p99", f"{percentile(values, 99):.2f} ms", "<= 20 ms" if hot else ""))
        rows += [
            ("counts (inbox totals) mean", f"{counts_ms:.2f} ms", ""),
            ("db size", f"{db_path.stat().st_size / 2**20:,.0f} MiB", ""),
            ("peak memory (ru_maxrss)", f"{peak_rss_mib():,.0f} MiB", ""),
        ]
        rows += search_rows
        print_table(
            f"store: rebuild of {total_events:,} log lines, then {args.runs} runs per query kind "
            f"(page of 50; e.g. {sample[0]} has {sample[1]:,} unread role mentions)",
            rows,
        )
        return {"rebuild_rate": rate, "rebuild_s": rebuild_s}
    finally:
        if not args.data_dir and not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def _sample_queries(db, rng: random.Random, n: int) -> list[str]:
    """Two words a person would remember of a message: two different non-function words of a random
    live message (so frequent words are asked for more often, as people do)."""
    top = db.execute_sql("SELECT max(rowid) FROM messages").fetchone()[0]
    skip = set(FUNCTION_WORDS)
    out: list[str] = []
    while len(out) < n:
        row = db.execute_sql(
            "SELECT body_content FROM messages WHERE rowid = ? AND deleted = 0", (rng.randint(1, top),)
        ).fetchone()
        if row is None:
            continue
        words = list(dict.fromkeys(w for w in row[0].split() if w.isalpha() and w.islower() and w not in skip))
        if len(words) >= 2:
            out.append(" ".join(rng.sample(words, 2)))
    return out


def _search_size(db) -> tuple[float, float]:
    """(MiB the search adds: its FTS5 tables, thread subjects, the two message columns; MiB of the rest)."""
    pages = dict(
        db.execute_sql(
            "SELECT name LIKE 'message_search%' OR name = 'thread_subjects', sum(pgsize) FROM dbstat GROUP BY 1"
        ).fetchall()
    )
    columns = db.execute_sql("SELECT sum(length(search_tags) + length(search_parts)) FROM messages").fetchone()[0]
    index = pages.get(1, 0) + (columns or 0)
    return index / 2**20, (pages.get(0, 0) - (columns or 0)) / 2**20


def bench_search(db, agents: list[str], runs: int) -> list[tuple[str, str, str]]:
    """Issue 26: search latency (two words, page of 20; filters) and the index's size."""
    rng = random.Random(26)
    now_dt = datetime.now(timezone.utc)
    now = now_dt.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def timed(texts: list[str]) -> tuple[list[float], list[int]]:
        lat, totals = [], []
        for i, text in enumerate(texts):
            viewer = agents[i % len(agents)]
            q = parse_query(text, now=now_dt).for_caller(viewer)
            t = time.perf_counter()
            out = search_messages(db, q, viewer=viewer, now=now, page_size=20)
            lat.append((time.perf_counter() - t) * 1000)
            totals.append(out["total"])
        return lat, totals

    two = _sample_queries(db, rng, runs)
    two_lat, two_totals = timed(two)
    filters = [f"from:{rng.choice(agents)} scope:module:mod{rng.randrange(20)} is:unread" for _ in range(runs)]
    f_lat, f_totals = timed(filters)
    wf_lat, _ = timed([f"{w} {f}" for w, f in zip(_sample_queries(db, rng, runs), filters)])
    dense_lat, dense_totals = timed(["auth module"] * max(10, runs // 10))
    index_mib, rest_mib = _search_size(db)
    return [
        ("search: two words, page of 20, p50", f"{statistics.median(two_lat):.2f} ms", "<= 10 ms"),
        ("search: two words, p99", f"{percentile(two_lat, 99):.2f} ms", "<= 50 ms"),
        (
            "  matches per query p50 / p99 / max",
            f"{statistics.median(two_totals):,.0f} / {percentile(two_totals, 99):,} / {max(two_totals):,}",
            "",
        ),
        ("search: from: + scope: + is:unread, p50", f"{statistics.median(f_lat):.2f} ms", "<= 20 ms"),
        ("search: same filters, p99", f"{percentile(f_lat, 99):.2f} ms", ""),
        (
            "search: two words + those filters, p50 / p99",
            f"{statistics.median(wf_lat):.2f} / {percentile(wf_lat, 99):.2f} ms",
            "",
        ),
        (f"search: 'auth module' ({dense_totals[0]:,} matches) p50", f"{statistics.median(dense_lat):.2f} ms", ""),
        ("search index size", f"{index_mib:,.0f} MiB ({index_mib / rest_mib:.0%} of the rest)", "<= 40 %"),
    ]


def _script_section(module_name: str):
    """A section that runs another scripts/bench_*.py with its defaults (see its --help)."""

    def run(args) -> None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        module = __import__(module_name)
        if hasattr(module, "section"):
            module.section(args)
        else:
            module.main([])

    return run


def _sections(*module_names: str):
    """A section made of several scripts/bench_*.py, run one after the other."""
    parts = [_script_section(name) for name in module_names]

    def run(args) -> None:
        for part in parts:
            part(args)

    return run


SECTIONS = {
    "store": bench_store,  # issue 2: rebuild rate, inbox query latency, memory
    "daemon": _script_section("bench_daemon"),  # issue 3: durable sends, message.list, CLI start-up
    "sync": _sections(
        "bench_sync",  # issue 4: sync against a 1M-event history
        "bench_remotes",
    ),  # issue 12: 12 replicas racing; bytes on the wire
    "realtime": _script_section("bench_realtime"),  # issue 5: notification latency, fan-out, wait
    "ui": _script_section("bench_ui"),  # issue 16: feed first render, send → on screen (browser)
    "soak": _script_section("bench_soak"),  # issue 15: N minutes of load, syncs and abuse
    "gcmail": _script_section("bench_gcmail"),  # issue 14: thrum-gc-mail check/send process wall time
    "hooks": _script_section("bench_hooks"),  # issue 24: thrum hook process, idle wake-up, receipts
    "mcp": _script_section("bench_mcp"),  # issue 10: MCP tool round trips, wake-up, start-up
    "storage": _script_section("bench_storage"),  # issue 11: repository growth and sync time over 5,000 syncs
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sections", nargs="*", help=f"sections to run (default: all): {', '.join(SECTIONS)}")
    p.add_argument("--list", action="store_true", help="list the sections and exit")
    p.add_argument("--events", type=int, default=1_000_000, help="store: message.create events to generate")
    p.add_argument("--runs", type=int, default=250, help="store: query runs per query kind")
    p.add_argument("--data-dir", help="keep generated data here (e.g. bench-data/) instead of a temp dir")
    p.add_argument("--reuse", action="store_true", help="store: reuse the log already in --data-dir")
    p.add_argument("--keep", action="store_true", help="do not delete the temp dir")
    p.add_argument("--minutes", type=float, default=10.0, help="soak: how long to run")
    p.add_argument("--soak-json", help="soak: also write the full result (every sample) to this file")
    args = p.parse_args(argv)
    if args.list:
        print("\n".join(SECTIONS))
        return 0
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        p.error(f"unknown section(s): {', '.join(unknown)} (known: {', '.join(SECTIONS)})")
    for name in args.sections or list(SECTIONS):
        SECTIONS[name](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

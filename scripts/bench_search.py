#!/usr/bin/env python3
"""Search tokenizers compared (issue 26): build time, size and what each finds of code identifiers.

    python scripts/bench_search.py --db bench-data/messages.db [--sample 200000]

Reads the live messages of a store-benchmark projection (``scripts/bench.py store
--data-dir bench-data --keep``) and builds, over the same sample, one FTS5 table per
candidate: ``unicode61`` (splits at punctuation), ``unicode61`` with ``_.-/`` as
token characters (an identifier is one token), ``trigram`` (substrings), and the one
thrum uses (``unicode61`` plus a column of CamelCase parts, `thrum.store.search_text`).
Prints build time and size per candidate, then which of a set of identifier
queries each one answers right (the reason for the choice: docs/design/decisions.md).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from thrum.store.search_text import camel_parts  # noqa: E402

VARIANTS = {
    "unicode61": ("tokenize='unicode61 remove_diacritics 2'", False),
    "unicode61 tokenchars '_.-/'": ("tokenize=\"unicode61 remove_diacritics 2 tokenchars '_.-/'\"", False),
    "trigram": ("tokenize='trigram'", False),
    "unicode61 + CamelCase parts (thrum)": ("tokenize='unicode61 remove_diacritics 2'", True),
}

# (query as a person types it, the FTS5 expression thrum would send, body that must match, body that must not)
CASES = [
    ("snake part", '"config"', "fix parse_config now", "fix the parser now"),
    ("snake whole", '"parse_config"', "fix parse_config now", "parse the config now"),
    ("snake whole, not 'a b'", '"parse_config"', "fix parse_config now", "parse config now"),
    ("dotted part", '"create"', "see message.create first", "see the message first"),
    ("dotted whole", '"message.create"', "see message.create first", "create a message"),
    ("path part", '"fold"', "edit thrum/store/fold.py", "edit thrum/store/sync.py"),
    ("path whole", '"store/fold.py"', "edit thrum/store/fold.py", "fold the store py"),
    ("CamelCase part", '"result"', "FoldResult leaks", "FoldError leaks"),
    ("CamelCase whole", '"FoldResult"', "FoldResult leaks", "fold the result"),
    ("word, not inside another", '"auth"', "auth is down", "the author is away"),
    ("two-letter word", '"ci"', "ci is red", "the city is red"),
    ("word before a full stop", '"done"', "it is done.", "it is undone"),
]


def _build(db: sqlite3.Connection, name: str, spec: str, parts: bool, rows: list[tuple]) -> tuple[float, float]:
    db.execute(f"DROP TABLE IF EXISTS {name}")
    db.execute(f"CREATE VIRTUAL TABLE {name} USING fts5(body, parts, {spec})")
    db.execute(f"INSERT INTO {name}({name}, rank) VALUES ('hashsize', ?)", (64 * 2**20,))
    t = time.process_time()  # CPU time: what other processes on a shared machine change least
    db.executemany(
        f"INSERT INTO {name}(rowid, body, parts) VALUES (?,?,?)",
        ((rid, body, camel_parts(body) if parts else "") for rid, body in rows),
    )
    db.commit()
    secs = time.process_time() - t
    size = db.execute("SELECT sum(pgsize) FROM dbstat WHERE name LIKE ?", (name + "%",)).fetchone()[0]
    return secs, size / 2**20


def _finds(spec: str, parts: bool) -> list[bool]:
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, parts, {spec})")
    out = []
    for _, expr, good, bad in CASES:
        db.execute("DELETE FROM t")
        for rid, body in ((1, good), (2, bad)):
            db.execute(
                "INSERT INTO t(rowid, body, parts) VALUES (?,?,?)", (rid, body, camel_parts(body) if parts else "")
            )
        got = {r[0] for r in db.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,))}
        out.append(got == {1})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="a store-benchmark projection (messages.db)")
    ap.add_argument("--sample", type=int, default=200_000, help="messages to index per candidate")
    args = ap.parse_args(argv)
    src = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    rows = src.execute(
        "SELECT rowid, body_content FROM messages WHERE deleted = 0 ORDER BY rowid LIMIT ?", (args.sample,)
    ).fetchall()
    text_mib = sum(len(b.encode()) for _, b in rows) / 2**20
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(Path(tmp) / "variants.db")
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        print(f"\nsearch tokenizers: {len(rows):,} message bodies ({text_mib:,.0f} MiB of text)")
        print(f"  {'candidate':40s} {'build CPU':>9s} {'size':>10s}  {'size/text':>9s}  finds right")
        for i, (label, (spec, parts)) in enumerate(VARIANTS.items()):
            secs, mib = _build(db, f"v{i}", spec, parts, rows)
            finds = _finds(spec, parts)
            print(f"  {label:40s} {secs:7.1f} s {mib:7.1f} MiB  {mib / text_mib:8.0%}   {sum(finds)}/{len(CASES)}")
            db.execute(f"DROP TABLE v{i}")
            db.commit()
    print("\n  case" + "".join(f" | {i}" for i in range(len(VARIANTS))) + "   (candidates in the order above)")
    table = [_finds(spec, parts) for spec, parts in VARIANTS.values()]
    for j, (label, expr, _, _) in enumerate(CASES):
        print(f"  {label:26s} {expr:18s}" + "".join(" | " + ("y" if col[j] else "-") for col in table))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-writer chains in the projection: the positions each signer's events hold, and the
contradictions between them (docs/design/trust.md, "Chains"; the rules: `thrum.trust.chains`).

Tables (rebuilt from the log like everything else here):

- ``chain_links``: one row per event that carries a chain (signer, seq, hash, prev,
  event id). Two rows at one position are a fork.
- ``chain_spans``: the positions held per signer, as ranges ("1-407,410"), so gaps and
  each writer's tip are read without a scan.
- ``chain_faults``: forks and broken links, with the events as evidence. Each fold
  re-evaluates only the positions it touched and the ones after them, from the rows
  held: the faults are a function of the set of events, not of the order they came in.

Nothing here refuses a line: every event in a chain verified on its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import peewee as pw

from ..trust.chains import Link, Spans, gap_text, link_of
from .sql import chunks, qmarks

__all__ = ["MAX_FAULTS", "report", "tip", "track"]

MAX_FAULTS = 10_000  # rows of faults kept (a key used on two machines for long writes many)
REPORT_ITEMS = 100  # gaps and faults listed by `report` (the totals count them all)


def track(conn, events: Iterable[dict], now: str) -> None:
    """Record the chain links of events being applied (inside the fold's transaction)."""
    by_signer: dict[str, list[Link]] = defaultdict(list)
    for d in events:
        if "chain" in d:
            link = link_of(d)
            if link is not None:
                by_signer[link.signer].append(link)
    for signer, links in by_signer.items():
        _track_signer(conn, signer, links, now)


def _track_signer(conn, signer: str, links: list[Link], now: str) -> None:
    row = conn.execute("SELECT spans FROM chain_spans WHERE signer = ?", (signer,)).fetchone()
    spans = Spans.parse(row[0]) if row else Spans()
    batch: dict[int, dict[str, Link]] = defaultdict(dict)
    for link in links:
        batch[link.seq][link.hash] = link
    near = set(batch) | {p + 1 for p in batch} | {p - 1 for p in batch}
    stored: dict[int, dict[str, tuple[str, str]]] = defaultdict(dict)  # seq -> hash -> (prev, event id)
    wanted = sorted(p for p in near if p >= 1 and spans.holds(p))
    for chunk in chunks(wanted):
        for seq, hash_, prev, eid in conn.execute(
            f"SELECT seq, hash, prev, event_id FROM chain_links WHERE signer = ? AND seq IN ({qmarks(len(chunk))})",
            [signer, *chunk],
        ):
            stored[seq][hash_] = (prev, eid)
    new = {p: {h: ln for h, ln in at.items() if h not in stored.get(p, {})} for p, at in batch.items()}
    new = {p: at for p, at in new.items() if at}
    if not new:
        return
    conn.executemany(
        "INSERT OR IGNORE INTO chain_links(signer, seq, hash, prev, event_id) VALUES (?,?,?,?,?)",
        [(signer, ln.seq, ln.hash, ln.prev, ln.event_id) for at in new.values() for ln in at.values()],
    )

    def at(p: int) -> dict[str, tuple[str, str]]:
        here = dict(stored.get(p, {}))
        for h, ln in new.get(p, {}).items():
            here[h] = (ln.prev, ln.event_id)
        return here

    evaluate = sorted(set(new) | {p + 1 for p in new})
    faults = []
    for p in evaluate:
        here = at(p)
        if not here:
            continue
        if len(here) > 1:
            ids = sorted(eid for _, eid in here.values())
            faults.append(
                (
                    f"fork:{signer}:{p}",
                    "fork",
                    p,
                    ids[0],
                    ",".join(ids[1:]),
                    f"{signer} #{p} is claimed by {len(ids)} different events ({', '.join(ids)}): "
                    f"the key signs on two machines, or was stolen",
                )
            )
        before = at(p - 1) if p > 1 else {}
        if before:
            for prev, eid in sorted(here.values(), key=lambda v: v[1]):
                if prev not in before:
                    held = sorted(e for _, e in before.values())
                    faults.append(
                        (
                            f"broken-link:{signer}:{p}:{eid}",
                            "broken-link",
                            p,
                            eid,
                            ",".join(held),
                            f"{signer} #{p} ({eid}) follows a #{p - 1} this replica does not hold "
                            f"(it holds {', '.join(held)}): another history of {signer} exists",
                        )
                    )
    stale = [p for p in evaluate if spans.holds(p)]  # positions whose faults may have changed
    for chunk in chunks(stale):
        conn.execute(f"DELETE FROM chain_faults WHERE signer = ? AND seq IN ({qmarks(len(chunk))})", [signer, *chunk])
    if faults:
        room = MAX_FAULTS - conn.execute("SELECT count(*) FROM chain_faults").fetchone()[0]
        conn.executemany(
            "INSERT OR REPLACE INTO chain_faults(key, kind, signer, seq, event_id, other, detail, seen_at) "
            "VALUES (?,?,?,?,?,?,?,?)",
            [(key, kind, signer, p, eid, other, detail[:1000], now) for key, kind, p, eid, other, detail in faults][
                : max(room, 0)
            ],
        )
    spans.add(list(new))
    conn.execute(
        "INSERT INTO chain_spans(signer, spans, high) VALUES (?,?,?) "
        "ON CONFLICT(signer) DO UPDATE SET spans = excluded.spans, high = excluded.high",
        (signer, spans.text(), spans.high()),
    )


def tip(db: pw.SqliteDatabase, signer: str) -> tuple[int, str]:
    """(seq, hash) of the highest event of ``signer``'s chain held here; (0, "") for none."""
    row = db.execute_sql(
        "SELECT seq, hash FROM chain_links WHERE signer = ? ORDER BY seq DESC, hash LIMIT 1", (signer,)
    ).fetchone()
    return (row[0], row[1]) if row else (0, "")


def report(db: pw.SqliteDatabase) -> dict:
    """Gaps and faults of every chain, for `sync status`, `thrum doctor` and the web UI."""
    gaps = []
    missing = 0
    writers = 0
    for signer, text, high in db.execute_sql("SELECT signer, spans, high FROM chain_spans ORDER BY signer"):
        writers += 1
        for lo, hi in Spans.parse(text).gaps():
            missing += hi - lo + 1
            if len(gaps) < REPORT_ITEMS:
                gaps.append(
                    {"signer": signer, "from": lo, "to": hi, "seen": high, "text": gap_text(signer, lo, hi, high)}
                )
    faults = [
        {
            "kind": kind,
            "signer": signer,
            "seq": seq,
            "event_id": eid,
            "other": other.split(",") if other else [],
            "text": detail,
        }
        for kind, signer, seq, eid, other, detail in db.execute_sql(
            "SELECT kind, signer, seq, event_id, other, detail FROM chain_faults ORDER BY signer, seq, key LIMIT ?",
            (REPORT_ITEMS,),
        )
    ]
    counts = dict(db.execute_sql("SELECT kind, count(*) FROM chain_faults GROUP BY kind").fetchall())
    return {
        "writers": writers,
        "missing": missing,
        "gaps": gaps,
        "forks": counts.get("fork", 0),
        "broken_links": counts.get("broken-link", 0),
        "faults": faults,
    }

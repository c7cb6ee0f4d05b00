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

Most batches only continue their writers' chains (a sync's lines, a durable send's one
event): each position new, one event at it, each the prev of the next, the first's prev
held at the writer's tip. No fault can arise there, so `_extend` records such a run in
two statements (the spans grown in SQL, only when the tip is the one expected, then the
links), and anything else goes the general way (`_track_signer`).

A rebuild loads a million links: inside `deferred` (the rebuild's load), `track` only
inserts them, and `settle` computes every writer's spans and faults once at the end,
in one ordered pass over ``chain_links``, with the same rules (`_faults_at`) as the
per-batch path, so both give the same tables.
"""

from __future__ import annotations

import binascii
import sqlite3
from binascii import a2b_base64, b2a_base64
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from hashlib import sha256
from typing import Any

import peewee as pw

from ..trust.chains import Link, Spans, gap_text, link_of
from .sql import chunks, qmarks

__all__ = ["MAX_FAULTS", "deferred", "report", "settle", "tip", "track"]

MAX_FAULTS = 10_000  # rows of faults kept (a key used on two machines for long writes many)
REPORT_ITEMS = 100  # gaps and faults listed by `report` (the totals count them all)


_DEFERRED: ContextVar[bool] = ContextVar("chain_fold_deferred", default=False)


@contextmanager
def deferred() -> Iterator[None]:
    """Within (this thread): `track` only inserts links. For a rebuild's load, which then
    calls `settle`."""
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


def track(conn: sqlite3.Connection, events: Iterable[dict[str, Any]], now: str) -> None:
    """Record the chain links of events being applied (inside the fold's transaction)."""
    rows = [row for d in events if "chain" in d and (row := link_row(d)) is not None]
    if not rows:
        return
    if _DEFERRED.get():
        conn.executemany(
            "INSERT OR IGNORE INTO chain_links(signer, seq, hash, prev, event_id) VALUES (?,?,?,?,?)", rows
        )
        return
    by_signer: dict[str, list[LinkRow]] = defaultdict(list)
    for row in rows:
        by_signer[row[0]].append(row)
    for signer, links in by_signer.items():
        if not _extend(conn, signer, links):
            _track_signer(conn, signer, links, now)


LinkRow = tuple[str, int, str, str, str]  # a row of chain_links: (signer, seq, hash, prev, event id)


def _extend(conn: sqlite3.Connection, signer: str, links: list[LinkRow]) -> bool:
    """The usual case in two statements: ``links`` (one signer's) continue its chain from its
    tip, one event a position, each the prev of the next. Then nothing is held at their
    positions, no fault can arise or go (faults sit at positions held), and the spans'
    last range grows to the last of them; True when that was so and they are recorded.
    False: nothing was written, `_track_signer` judges them (a fork, a gap, a duplicate,
    a tip this replica does not hold as their prev).

    The spans are extended in SQL (their text ends with the tip: "…-high" or "…,high"),
    only when the row's tip is just below the first link and the chain holds that link's
    prev there, so reading the spans first is not needed: a durable send folds one event."""
    if len(links) > 1:
        links.sort(key=lambda ln: ln[1])
    first, last = links[0], links[-1]
    if last[1] - first[1] != len(links) - 1:
        return False  # a gap, or two events at a position
    for before, ln in zip(links, links[1:]):
        if ln[3] != before[2]:
            return False
    if first[1] == 1:  # a chain's start: the signer must hold nothing yet
        done = conn.execute(
            "INSERT INTO chain_spans(signer, spans, high) VALUES (?,?,?) ON CONFLICT(signer) DO NOTHING",
            (signer, f"1-{last[1]}" if last[1] > 1 else "1", last[1]),
        ).rowcount
    else:
        done = conn.execute(
            "UPDATE chain_spans SET high = ?1, spans = CASE "
            "WHEN substr(rtrim(spans, '0123456789'), -1) = '-' THEN rtrim(spans, '0123456789') || ?1 "
            "ELSE spans || '-' || ?1 END "
            "WHERE signer = ?2 AND high = ?3 - 1 AND EXISTS "
            "(SELECT 1 FROM chain_links WHERE signer = ?2 AND seq = ?3 - 1 AND hash = ?4)",
            (last[1], signer, first[1], first[3]),
        ).rowcount
    if done != 1:
        return False
    conn.executemany("INSERT INTO chain_links(signer, seq, hash, prev, event_id) VALUES (?,?,?,?,?)", links)
    return True


def link_row(d: dict[str, Any]) -> tuple[str, int, str, str, str] | None:
    """`link_of` as a row of ``chain_links`` (signer, seq, hash, prev, event id), for a
    rebuild's million events: the same checks of the signature (`signing.signature_of`:
    88 characters of strict base64 that are 64 bytes) and the same hash (`chains.sig_hash`),
    without the objects and wrappers in between."""
    sig, chain = d.get("sig"), d.get("chain")
    if type(sig) is not dict or type(chain) is not dict:
        return link_row_checked(d)
    by, text = sig.get("by"), sig.get("ed25519")
    if type(by) is not str or type(text) is not str or len(text) != 88:
        return None
    try:
        raw = a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 64:
        return None
    hash_ = b2a_base64(sha256(raw).digest()[:16], newline=False).translate(_URLSAFE)[:22].decode()
    return (by, chain["seq"], hash_, chain.get("prev") or "", str(d.get("event_id", "")))


def link_row_checked(d: dict[str, Any]) -> tuple[str, int, str, str, str] | None:
    link = link_of(d)
    return None if link is None else (link.signer, link.seq, link.hash, link.prev, link.event_id)


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def settle(conn: sqlite3.Connection, now: str) -> None:
    """Every writer's spans and faults from the links held, in one pass (after a deferred load).

    A rebuild's million links are nearly all the usual case: one event at a position,
    whose prev is among the events held at the position before (or that has none: the
    chain's first, or the first after a gap). No fault can be at such a position, so the
    loop passes over it without asking `_faults_at`; the spans are grown as runs of
    positions while the rows come in order."""
    conn.execute("DELETE FROM chain_spans")
    conn.execute("DELETE FROM chain_faults")
    spans_rows: list[tuple[str, str, int]] = []
    faults: list[tuple[str, str, str, int, str, str, str, str]] = []
    signer = ""
    runs: list[list[int]] = []  # the signer's positions held, as [low, high] runs
    before: dict[str, tuple[str, str]] = {}  # hash -> (prev, event id) at p - 1 (empty: none held)
    here: dict[str, tuple[str, str]] = {}  # ... at p
    p = 0

    def close_position() -> None:
        if len(here) == 1 and (not before or next(iter(here.values()))[0] in before):
            return  # the usual case: no fault
        for key, kind, q, eid, other, detail in _faults_at(signer, p, here, before):
            faults.append((key, kind, signer, q, eid, other, detail[:1000], now))

    for s, seq, hash_, prev, eid in conn.execute(
        "SELECT signer, seq, hash, prev, event_id FROM chain_links ORDER BY signer, seq, hash"
    ):
        if seq != p or s != signer:
            if here:
                close_position()
            if s != signer:
                if runs:
                    spans_rows.append((signer, Spans([(lo, hi) for lo, hi in runs]).text(), runs[-1][1]))
                signer, runs, here, p = s, [], {}, 0
            before = here if seq == p + 1 and p >= 1 else {}
            here, p = {}, seq
            if runs and runs[-1][1] == seq - 1:
                runs[-1][1] = seq
            else:
                runs.append([seq, seq])
        here[hash_] = (prev, eid)
    if here:
        close_position()
    if runs:
        spans_rows.append((signer, Spans([(lo, hi) for lo, hi in runs]).text(), runs[-1][1]))
    conn.executemany("INSERT INTO chain_spans(signer, spans, high) VALUES (?,?,?)", spans_rows)
    if faults:
        conn.executemany(
            "INSERT OR REPLACE INTO chain_faults(key, kind, signer, seq, event_id, other, detail, seen_at) "
            "VALUES (?,?,?,?,?,?,?,?)",
            faults[:MAX_FAULTS],
        )


def _faults_at(
    signer: str, p: int, here: dict[str, tuple[str, str]], before: dict[str, tuple[str, str]]
) -> list[tuple[str, str, int, str, str, str]]:
    """The faults at position ``p`` of ``signer``'s chain, from the events held there and at
    ``p - 1`` (hash -> (prev, event id)): a fork, and links whose prev is none of those before."""
    faults = []
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
    return faults


def _track_signer(conn: sqlite3.Connection, signer: str, rows: list[LinkRow], now: str) -> None:
    row = conn.execute("SELECT spans FROM chain_spans WHERE signer = ?", (signer,)).fetchone()
    spans = Spans.parse(row[0]) if row else Spans()
    batch: dict[int, dict[str, Link]] = defaultdict(dict)
    for _, seq, hash_, prev, eid in rows:
        batch[seq][hash_] = Link(signer, seq, prev, hash_, eid, "")
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
        fresh = new.get(p)
        if fresh is not None and len(fresh) == 1 and p not in stored:
            # The usual case (a rebuild, a sync): one new event at a position nobody held.
            # No fork; a broken link only when the one event before it is not its prev.
            (link,) = fresh.values()
            before_new, before_stored = new.get(p - 1), stored.get(p - 1)
            if p == 1 or (before_new is None and before_stored is None):
                continue
            if before_stored is None and before_new is not None and len(before_new) == 1 and link.prev in before_new:
                continue
        here = at(p)
        if not here:
            continue
        faults.extend(_faults_at(signer, p, here, at(p - 1) if p > 1 else {}))
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


def report(db: pw.SqliteDatabase) -> dict[str, Any]:
    """Gaps and faults of every chain, for `sync status`, `thrum doctor` and the web UI."""
    gaps: list[dict[str, Any]] = []
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

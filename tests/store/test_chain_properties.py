"""Per-writer chains in the projection (issue 25, item 4): replicas that receive the same
lines in any order and batching reach the same verdicts — the same gaps, forks and broken
links — and each withheld range, fork or broken link is reported at its numbers."""

from __future__ import annotations

import base64
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.examples import examples
from thrum import events as ev
from thrum.store import chain_fold, database, projection
from thrum.trust import keys, signing
from thrum.trust.chains import sig_hash

from store_helpers import ulid_at

pytestmark = pytest.mark.properties  # scripts/soak draws more examples

PRIVATE = {name: keys.generate() for name in ("alice", "bob")}


def _event(n: int, agent: str, seq: int, prev: str) -> dict:
    chain = {"seq": seq} if seq == 1 else {"seq": seq, "prev": prev}
    d = {
        "type": "message.read",
        "timestamp": "2026-02-03T10:00:00.000Z",
        "event_id": ulid_at(n),
        "v": 1,
        "agent_id": agent,
        "message_ids": [f"msg_{n}"],
        "chain": chain,
    }
    return ev.normalise(signing.sign(d, agent, PRIVATE[agent]))


def _history(spec) -> list[tuple[str, dict]]:
    """Chains of alice and bob of the given lengths, with some positions withheld, some
    forked (a second event at the position) and some second events linking elsewhere."""
    lengths, withheld, forked, stray = spec
    out = []
    n = 0
    for agent, length in zip(("alice", "bob"), lengths):
        prev = ""
        for seq in range(1, length + 1):
            n += 1
            d = _event(n, agent, seq, prev)
            if seq not in withheld:
                out.append((f"receipts/{agent}/000001.jsonl", d))
            if seq in forked and seq <= length:
                n += 1
                out.append(
                    (f"receipts/{agent}/000001.jsonl", _event(n, agent, seq, "B" * 22 if seq in stray else prev))
                )
            prev = sig_hash(signing.signature_of(d)[1])
    return out


def _fresh(tmp: Path, name: str):
    db = database.open_database(tmp / f"{name}.db")
    database.create_schema(db)
    return db


def _verdicts(db) -> dict:
    r = chain_fold.report(db)
    return {
        "gaps": [(g["signer"], g["from"], g["to"], g["seen"]) for g in r["gaps"]],
        "faults": sorted((f["kind"], f["signer"], f["seq"], f["event_id"], tuple(f["other"])) for f in r["faults"]),
        "missing": r["missing"],
    }


def _fold_in_batches(db, records: list, rnd, *, most: int, again: float, back: int) -> None:
    """Fold ``records`` in their order in batches of 1 to ``most``; now and then a batch
    comes again with the ``back`` lines before it (a replica that receives lines twice)."""
    i = 0
    while i < len(records):
        step = rnd.randint(1, most)
        projection.fold(db, records[i : i + step])
        if rnd.random() < again:
            projection.fold(db, records[max(0, i - back) : i + step])
        i += step


SPEC = st.tuples(
    st.tuples(st.integers(1, 12), st.integers(0, 8)),
    st.sets(st.integers(1, 12), max_size=4),
    st.sets(st.integers(2, 12), max_size=3),
    st.sets(st.integers(2, 12), max_size=3),
)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SPEC, st.randoms(use_true_random=False))
def test_replicas_receiving_the_same_lines_in_any_order_reach_the_same_verdicts(spec, rnd):
    records = _history(spec)
    with tempfile.TemporaryDirectory() as tmp:
        one = _fresh(Path(tmp), "one")
        projection.fold(one, records)
        expected = _verdicts(one)
        other = _fresh(Path(tmp), "other")
        shuffled = list(records)
        rnd.shuffle(shuffled)
        _fold_in_batches(other, shuffled, rnd, most=4, again=0.3, back=2)
        assert _verdicts(other) == expected
        one.close()
        other.close()


def test_a_second_history_is_a_broken_link_at_its_numbers(tmp_path):
    db = _fresh(tmp_path, "db")
    projection.fold(db, _history(((5, 0), set(), {3}, {3})))
    faults = chain_fold.report(db)["faults"]
    assert sorted((f["kind"], f["seq"]) for f in faults) == [("broken-link", 3), ("fork", 3)]


def test_each_verdict_names_its_numbers(tmp_path):
    records = _history(((10, 3), {4, 5}, {7}, set()))
    db = _fresh(tmp_path, "db")
    projection.fold(db, records)
    got = chain_fold.report(db)
    assert [g["text"] for g in got["gaps"]] == ["missing alice #4–5 (seen #10)"]
    assert got["missing"] == 2 and got["writers"] == 2 and got["forks"] == 1
    fork = next(f for f in got["faults"] if f["kind"] == "fork")
    assert (fork["signer"], fork["seq"]) == ("alice", 7) and len(fork["other"]) == 1
    assert got["broken_links"] == 0  # both events at #7 follow the #6 held
    assert chain_fold.tip(db, "bob") == (3, sig_hash(signing.signature_of(records[-1][1])[1]))


@settings(max_examples=examples(200), deadline=None)
@given(
    st.fixed_dictionaries(
        {"event_id": st.just("01JD0000000000000000000000"), "chain": st.just({"seq": 3, "prev": "P" * 22})},
        optional={
            "sig": st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "by": st.one_of(st.just("ann"), st.integers()),
                        "ed25519": st.one_of(
                            st.binary(min_size=60, max_size=68).map(lambda b: base64.b64encode(b).decode()),
                            st.text(alphabet="AQgw+/=-_ab", min_size=86, max_size=90),
                            st.integers(),
                        ),
                    },
                ),
                st.text(max_size=3),
            )
        },
    )
)
def test_the_rebuilds_link_rows_are_the_links_of_the_events(d):
    """chain_fold.link_row (a rebuild's fast path) names exactly what chains.link_of names."""
    assert chain_fold.link_row(d) == chain_fold.link_row_checked(d)


def _chain_tables(db) -> dict:
    return {
        "links": db.execute_sql("SELECT * FROM chain_links ORDER BY signer, seq, hash").fetchall(),
        "spans": db.execute_sql("SELECT * FROM chain_spans ORDER BY signer").fetchall(),
        "faults": db.execute_sql(
            "SELECT key, kind, signer, seq, event_id, other, detail FROM chain_faults ORDER BY key"
        ).fetchall(),
    }


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SPEC, st.randoms(use_true_random=False))
def test_chains_grown_in_order_keep_the_tables_a_rebuild_settles(spec, rnd):
    """The lines of a sync or a send continue their writers' chains: folded in their order,
    in batches of any size and some again, they leave chain_links, chain_spans and
    chain_faults row for row as a rebuild's settle computes them from the same links."""
    records = _history(spec)
    with tempfile.TemporaryDirectory() as tmp:
        grown = _fresh(Path(tmp), "grown")
        _fold_in_batches(grown, records, rnd, most=5, again=0.2, back=3)
        settled = _fresh(Path(tmp), "settled")
        with settled.atomic():
            with chain_fold.deferred():
                projection.fold(settled, records)
            chain_fold.settle(settled.connection(), ev.now_rfc3339())
        assert _chain_tables(grown) == _chain_tables(settled)
        grown.close()
        settled.close()

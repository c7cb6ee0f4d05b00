"""Receipts give the same rows however they are folded (issue 29).

`message_fold.receipt` (read, unread, archive) and `delivery_fold.delivery_receipt`
(delivered, surfaced, acked) hand each receipt's message ids to SQLite as one JSON array
(``json_each``), the receipts in the order of their first message; `receipt_marks` and
`delivery_marks` (for an SQLite without JSON functions) bind every mark as a row of its
own. Generated receipts (several agents, marks on the same messages arriving in any order
and in random batches, a message named twice in one receipt, marks on messages that never
arrive) are folded both ways, and both must hold what the rules say, per (message, agent):
the read or unread mark with the highest event id, the archive with the lowest, and of the
delivery states the lowest event id each (the last surfacing: the highest).
"""

from __future__ import annotations

import random
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.examples import examples
from thrum import events as ev
from thrum.store import database, projection, sql

from store_helpers import Events

pytestmark = pytest.mark.properties  # scripts/soak draws more examples

AGENTS = ["ann", "ben", "cat"]
SLOTS = 5  # message ids msg_R0 .. msg_R4; the messages of the first three are created
_mark = st.tuples(
    st.sampled_from(["read", "unread", "archive", "delivered", "surfaced", "acked"]),
    st.sampled_from(AGENTS),
    st.lists(st.integers(0, SLOTS - 1), min_size=1, max_size=4),
    st.booleans(),  # a message named twice in the receipt (as a hostile line could)
)


@contextmanager
def marks_one_by_one():
    """The fold as on an SQLite without JSON functions."""
    saved = sql.JSON_EACH
    sql.JSON_EACH = False
    try:
        yield
    finally:
        sql.JSON_EACH = saved


def fold_in_batches(path: Path, records: list, cuts: list[int]):
    db = database.open_database(path)
    database.create_schema(db)
    at = 0
    for cut in [*cuts, len(records)]:
        projection.fold(db, records[at:cut])
        at = cut
    return db


DELIVERY_COLUMNS = (
    "message_id, agent_id, delivered_at, delivered_eid, surfaced_at, surfaced_eid, surfaced_via, "
    "last_surfaced_key, last_surfaced_eid, acked_at, acked_eid"
)


def marks(db) -> tuple[list, list, list]:
    return (
        db.execute_sql("SELECT * FROM read_state ORDER BY message_id, agent_id").fetchall(),
        db.execute_sql("SELECT * FROM archive_marks ORDER BY message_id, agent_id").fetchall(),
        db.execute_sql(f"SELECT {DELIVERY_COLUMNS} FROM deliveries ORDER BY message_id, agent_id").fetchall(),
    )


def expected(receipts: list) -> tuple[list, list, list]:
    """The rules, applied to the receipts in event order."""
    state: dict[tuple[str, str], tuple] = {}
    archived: dict[tuple[str, str], tuple] = {}
    deliveries: dict[tuple[str, str], list] = {}
    for _, d in sorted(receipts, key=lambda r: r[1]["event_id"]):
        eid, ts = d["event_id"], d["timestamp"]
        for mid in d["message_ids"]:
            key = (mid, d["agent_id"])
            if d["type"] == "message.archive":
                archived.setdefault(key, (*key, eid, ts))
            elif d["type"] in ("message.read", "message.unread"):
                state[key] = (*key, 1 if d["type"] == "message.read" else 0, eid, ts, d["session_id"])
            else:
                row = deliveries.setdefault(key, [*key] + [None] * 9)
                if d["type"] == "message.delivered" and row[3] is None:
                    row[2:4] = [ts, eid]
                elif d["type"] == "message.acked" and row[10] is None:
                    row[9:11] = [ts, eid]
                elif d["type"] == "message.surfaced":
                    if row[5] is None:
                        row[4:7] = [ts, eid, d["via"]]
                    row[7:9] = [ev.time_key(ts), eid]
    return (
        [state[k] for k in sorted(state)],
        [archived[k] for k in sorted(archived)],
        [tuple(deliveries[k]) for k in sorted(deliveries)],
    )


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_mark, min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_receipts_folded_as_json_arrays_or_mark_by_mark_give_the_rules_rows(generated, rng: random.Random):
    e = Events()
    creates = [e.create("ann", f"m{i}", mid=f"msg_R{i}", mentions=["ben"]) for i in range(3)]
    receipts = []
    for kind, agent, slots, twice in generated:
        shard, d = getattr(e, kind)(agent, *(f"msg_R{i}" for i in slots))
        if twice:
            d = dict(d, message_ids=[*d["message_ids"], d["message_ids"][0]])
        receipts.append((shard, d))
    arrival = creates + receipts
    rng.shuffle(arrival)  # marks before their message, later marks before earlier ones
    cuts = sorted(rng.sample(range(1, len(arrival)), min(3, len(arrival) - 1)))
    with tempfile.TemporaryDirectory() as tmp:
        as_arrays = fold_in_batches(Path(tmp) / "arrays.db", arrival, cuts)
        with marks_one_by_one():
            one_by_one = fold_in_batches(Path(tmp) / "marks.db", arrival, cuts)
        try:
            assert marks(as_arrays) == marks(one_by_one) == expected(receipts)
            assert projection.verify_counters(as_arrays) == projection.verify_counters(one_by_one) == []
        finally:
            as_arrays.close()
            one_by_one.close()


def test_a_receipt_naming_thousands_of_messages_marks_each_once(tmp_path):
    e = Events()
    mids = [f"msg_T{i:05d}" for i in range(5000)]
    db = database.open_database(tmp_path / "p.db")
    database.create_schema(db)
    first = e.read("ann", *mids[:3000])
    later = e.unread("ann", *mids[2000:])
    projection.fold(db, [later, first])  # the later mark first: it still wins where both name a message
    rows = dict(db.execute_sql("SELECT message_id, is_read FROM read_state WHERE agent_id = 'ann'").fetchall())
    assert len(rows) == 5000
    assert sum(rows.values()) == 2000
    assert rows["msg_T01999"] == 1 and rows["msg_T02000"] == 0
    db.close()

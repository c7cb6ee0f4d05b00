"""Properties of the fold (DESIGN §5), checked on generated event sets.

(a) any arrival order, in any batches, gives the same query results;
(b) a rebuild from the log equals folding it incrementally;
(c) duplicated events change nothing;
(d) forged events (wrong shard, non-author edit/delete) change nothing.

Each compares `store_helpers.snapshot`: every agent's inbox under many filters,
every message, groups, members, agents, sessions, and the counters against a
recount from scratch.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.examples import examples

from thrum import events as ev
from thrum.store import database, projection
from thrum.store.log import EventLog

from store_helpers import Events, snapshot

AGENTS = ["ann", "ben", "cat", "dan"]
ROLES = {"ann": "dev", "ben": "dev", "cat": "qa", "dan": "ops"}
GROUPS = ["g1", "g2"]
TARGETS = AGENTS + sorted(set(ROLES.values())) + GROUPS + ["everyone"]

pytestmark = pytest.mark.properties  # scripts/soak draws more examples
SETTINGS = settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])

_agent = st.sampled_from(AGENTS)
_slot = st.integers(0, 3)  # message slots: several creates may share one (id conflicts)
_ops = st.one_of(
    st.tuples(
        st.just("create"), _agent, _slot, st.lists(st.sampled_from(TARGETS), max_size=2), st.booleans(), st.booleans()
    ),
    st.tuples(st.just("edit"), _slot, st.booleans()),  # bool: by the author (else: by someone else)
    st.tuples(st.just("delete"), _slot, st.booleans()),
    st.tuples(
        st.sampled_from(["read", "unread", "archive", "delivered", "surfaced", "acked"]),
        _agent,
        st.lists(_slot, min_size=1, max_size=3),
    ),
    st.tuples(st.just("create_ack"), _agent, _slot, st.lists(st.sampled_from(TARGETS), max_size=2), st.booleans()),
    st.tuples(st.sampled_from(["group.create", "group.delete"]), st.sampled_from(GROUPS)),
    st.tuples(
        st.sampled_from(["add", "remove"]),
        st.sampled_from(GROUPS),
        st.one_of(st.tuples(st.just("agent"), _agent), st.tuples(st.just("role"), st.sampled_from(["dev", "qa"]))),
    ),
    st.tuples(st.sampled_from(["register", "cleanup", "role"]), _agent),
    st.tuples(st.just("session"), _agent, st.booleans()),
)


def build(ops) -> tuple[list, list, list[str]]:
    """Turn generated operations into (valid records, forged records, message ids).

    Every valid record is something a well-behaved replica could have written;
    the forged ones are what a hostile one could push.
    """
    e = Events()
    valid = [e.register(a, ROLES[a]) for a in AGENTS[:2]]
    forged = []
    for op in ops:
        kind = op[0]
        if kind == "create":
            _, agent, slot, mentions, scoped, threaded = op
            rec = e.create(
                agent,
                f"c{e.n}",
                mid=f"msg_S{slot}",
                mentions=mentions,
                scopes=[("module", "a")] if scoped else (),
                thread_id="thr_1" if threaded else "",
                refs=[("issue", "1")] if scoped else (),
                subject=f"s{e.n}" if scoped and threaded else "",
            )
            valid.append(rec)
            other = next(a for a in AGENTS if a != agent)
            forged.append(
                (f"messages/{other}/000001.jsonl", e.create(agent, "in someone else's shard", mid=f"msg_S{slot}")[1])
            )
        elif kind == "create_ack":
            _, agent, slot, mentions, deadline = op
            rec = e.create(
                agent, f"c{e.n}", mid=f"msg_S{slot}", mentions=mentions, ack=True, ack_within=60 if deadline else 0
            )
            valid.append(rec)
        elif kind in ("edit", "delete"):
            _, slot, by_author = op
            creators = {o[1] for o in ops if o[0] in ("create", "create_ack") and o[2] == slot}
            if by_author and len(creators) == 1:  # the author is unambiguous whatever create wins
                who = next(iter(creators))
                valid.append(
                    e.edit(who, f"msg_S{slot}", f"e{e.n}") if kind == "edit" else e.delete(who, f"msg_S{slot}")
                )
            elif not by_author:
                who = next((a for a in AGENTS if a not in creators), None)
                if who is not None:  # an agent that wrote no create for this id: never the author
                    forged.append(
                        e.edit(who, f"msg_S{slot}", "hijacked")
                        if kind == "edit"
                        else e.delete(who, f"msg_S{slot}", reason="hijacked")
                    )
        elif kind in ("read", "unread", "archive", "delivered", "surfaced", "acked"):
            _, agent, slots = op
            msg_ids = [f"msg_S{s}" for s in slots]
            rec = getattr(e, kind)(agent, *msg_ids)
            valid.append(rec)
            other = next(a for a in AGENTS if a != agent)
            forged.append((f"receipts/{other}/000001.jsonl", rec[1]))  # a copy in the wrong shard
            forged.append((f"receipts/{other}/000001.jsonl", getattr(e, kind)(agent, *msg_ids)[1]))
        elif kind == "group.create":
            valid.append(e.group_create(op[1]))
        elif kind == "group.delete":
            valid.append(e.group_delete(op[1]))
        elif kind in ("add", "remove"):
            _, group, (mtype, value) = op
            rec = e.member_add(group, value, mtype) if kind == "add" else e.member_remove(group, value, mtype)
            valid.append(rec)
            forged.append(
                (
                    "messages/ann/000001.jsonl",
                    (e.member_remove if kind == "add" else e.member_add)(group, value, mtype)[1],
                )
            )
        elif kind == "register":
            valid.append(e.register(op[1], ROLES[op[1]]))
        elif kind == "role":  # a new role: what the search index says of its author follows
            valid.append(e.register(op[1], "lead"))
        elif kind == "cleanup":
            valid.append(e.cleanup(op[1]))
        elif kind == "session":
            _, agent, end = op
            sid = f"ses_{agent}{e.n}"
            valid.append(e.session_start(agent, sid))
            if end:
                valid.append(e.session_end(sid, agent))
    return valid, forged, sorted({f"msg_S{s}" for s in range(6)})


def fresh_db(tmp: Path, name: str):
    db = database.open_database(tmp / f"{name}.db")
    database.create_schema(db)
    return db


def fold_in_batches(db, records, rng: random.Random) -> None:
    i = 0
    while i < len(records):
        n = rng.randint(1, 6)
        projection.fold(db, records[i : i + n])
        i += n


def snap(db, message_ids, *, with_issues=True) -> str:
    assert projection.verify_counters(db) == []
    return snapshot(db, AGENTS, ["dev", "qa", "ops"], GROUPS, message_ids, with_issues=with_issues)


@SETTINGS
@given(st.lists(_ops, min_size=1, max_size=25), st.randoms(use_true_random=False))
def test_any_order_and_batching_gives_the_same_state(ops, rng):
    valid, forged, mids = build(ops)
    records = valid + forged
    with tempfile.TemporaryDirectory() as tmp:
        one = fresh_db(Path(tmp), "one")
        projection.fold(one, records)
        shuffled = list(records)
        rng.shuffle(shuffled)
        two = fresh_db(Path(tmp), "two")
        fold_in_batches(two, shuffled, rng)
        assert snap(one, mids) == snap(two, mids)


@SETTINGS
@given(st.lists(_ops, min_size=1, max_size=25), st.randoms(use_true_random=False))
def test_rebuild_equals_incremental_fold(ops, rng):
    valid, forged, mids = build(ops)
    records = valid + forged
    rng.shuffle(records)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "log"
        root.mkdir()
        log = EventLog(root)
        incremental = fresh_db(Path(tmp), "inc")
        i = 0
        while i < len(records):  # the daemon's way: append, then catch up
            n = rng.randint(1, 5)
            for shard, d in records[i : i + n]:
                path = root / (shard if ev.is_log_path(shard) else ev.segment_path(shard, 1 + len(shard) % 3))
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "ab") as f:
                    f.write(ev.encode_line(d))
            projection.catch_up(incremental, log)
            i += n
        rebuilt = database.open_database(Path(tmp) / "rebuilt.db")
        projection.rebuild(rebuilt, log)
        assert snap(incremental, mids) == snap(rebuilt, mids)


@SETTINGS
@given(st.lists(_ops, min_size=1, max_size=25), st.randoms(use_true_random=False))
def test_duplicated_events_change_nothing(ops, rng):
    valid, forged, mids = build(ops)
    records = valid + forged
    doubled = records + [rng.choice(records) for _ in range(len(records))]
    rng.shuffle(doubled)
    with tempfile.TemporaryDirectory() as tmp:
        once = fresh_db(Path(tmp), "once")
        projection.fold(once, records)
        twice = fresh_db(Path(tmp), "twice")
        fold_in_batches(twice, doubled, rng)
        projection.fold(twice, records)
        assert snap(once, mids) == snap(twice, mids)


# Operations that always come with forged copies (wrong shard); the forged-events
# property draws at least one, so it never passes for want of something to refuse.
_forging_op = _ops.filter(
    lambda op: op[0] in ("create", "read", "unread", "archive", "delivered", "surfaced", "acked", "add", "remove")
)


@SETTINGS
@given(
    st.tuples(st.lists(_ops, max_size=24), _forging_op).map(lambda t: t[0] + [t[1]]), st.randoms(use_true_random=False)
)
def test_forged_events_change_nothing(ops, rng):
    valid, forged, mids = build(ops)
    assert forged  # the property is about something
    with_forged = valid + forged
    rng.shuffle(with_forged)
    with tempfile.TemporaryDirectory() as tmp:
        clean = fresh_db(Path(tmp), "clean")
        projection.fold(clean, valid)
        dirty = fresh_db(Path(tmp), "dirty")
        fold_in_batches(dirty, with_forged, rng)
        assert snap(clean, mids, with_issues=False) == snap(dirty, mids, with_issues=False)
        forged_ids = {d["event_id"] for _, d in forged}
        recorded = {r[0] for r in dirty.execute_sql("SELECT event_id FROM fold_issues WHERE kind = 'forged'")}
        assert recorded  # every forging op puts an event in a shard it does not belong in: refused and recorded
        assert recorded <= forged_ids

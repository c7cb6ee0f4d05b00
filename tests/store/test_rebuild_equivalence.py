"""A rebuild gives the projection, row for row, that folding the log as it grew gave (issue 29).

Generated logs: the fold properties' events (tests/store/test_projection_properties.py),
each signed and placed in its author's chain (with forks and gaps), plus hostile lines
(not JSON, not an event, a broken chain, events in another agent's file). They are
appended in random batches and caught up after each, as the daemon does; then the log is
rebuilt into a new database. Every table is compared row for row, except what names the
moment or the order rows were made in: ``seen_at``, autoincrement ids and rowids (mention
set ids are compared as the sets they name), and mention sets no message uses (a create
that lost an id conflict may leave its set behind: a cache, counted as zero); the search
index is compared by what each word finds. A fold issue is compared by what it is about, not by
its wording, which tells what the replica knew when it met the line (an edit refused as not
the author's names the author of the create that was winning then).
"""

from __future__ import annotations

import base64
import hashlib
import random
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.examples import examples
from thrum import events as ev
from thrum.store import database, projection, search_beside, search_index
from thrum.store.log import EventLog
from thrum.trust.chains import sig_hash

from test_projection_properties import _ops, build

pytestmark = pytest.mark.properties  # scripts/soak draws more examples

HOSTILE = [
    b"not json at all",
    b'{"type": "message.create"}',
    b"[" * 300 + b"]" * 300,
    b'{"type":"message.read","timestamp":"2026-02-30T00:00:00Z","event_id":"01JD0000000000000000000000",'
    b'"agent_id":"ann","message_ids":["msg_S1"]}',
    b'{"type":"some.future.type","timestamp":"2026-01-01T00:00:00Z","event_id":"01JD0000000000000000000001"}',
]
_IGNORED_COLUMNS = {"seen_at", "id", "last_seen_at"}


def sign_and_chain(records: list, rng: random.Random) -> list:
    """Each event signed (a made-up signature: no trust check here) and numbered in its
    author's chain; now and then a position is skipped (a gap) or taken twice (a fork)."""
    seq: dict[str, int] = {}
    tip: dict[str, str] = {}
    out = []
    for i, (shard, d) in enumerate(records):
        author = ev.event_author(d) or "ann"
        raw = hashlib.sha512(i.to_bytes(4, "big") + rng.randbytes(8)).digest()  # one per event, as signatures are
        sig = base64.b64encode(raw).decode()
        n = seq.get(author, 0) + 1
        roll = rng.random()
        if roll < 0.1:
            n += 1  # a gap
        elif roll < 0.2 and n > 1:
            n -= 1  # a fork: the position again
        chain: dict = {"seq": n}
        if n > 1:
            chain["prev"] = tip.get(author) or "A" * 22
        seq[author] = n
        tip[author] = sig_hash(raw)
        out.append((shard, {**d, "chain": chain, "sig": {"by": author, "ed25519": sig}}))
    return out


def rows(db) -> dict[str, list]:
    """Every table's rows, as comparable values (see the module docstring)."""
    sigs = dict(db.execute_sql("SELECT sig_id, sig FROM mention_sigs").fetchall())
    used = {sigs[r[0]] for r in db.execute_sql("SELECT DISTINCT sig_id FROM messages").fetchall()}
    out: dict[str, list] = {}
    for (table,) in db.execute_sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND name NOT LIKE 'message_search%' ORDER BY name"
    ).fetchall():
        cursor = db.execute_sql(f'SELECT * FROM "{table}"')
        names = [c[0] for c in cursor.description]
        table_rows = []
        for row in cursor.fetchall():
            values = []
            for name, value in zip(names, row):
                if name in _IGNORED_COLUMNS or (table, name) in (("mention_sigs", "sig_id"), ("fold_issues", "reason")):
                    continue
                values.append(sigs.get(value, value) if name == "sig_id" else value)
            if (
                table in ("mention_sigs", "mention_sig_targets")
                and values[-1 if table == "mention_sigs" else 1] not in used
            ):
                continue
            if table in ("sig_totals", "sig_author_totals", "agent_sig_counts") and not any(
                isinstance(v, int) and v
                for n, v in zip([n for n in names if n not in _IGNORED_COLUMNS], values)
                if n.startswith("n")
            ):
                continue
            table_rows.append(repr(values))
        out[table] = sorted(table_rows)
    words = set()
    for (body,) in db.execute_sql("SELECT body_content FROM messages").fetchall():
        words.update(re.findall(r"[a-z0-9]+", body.lower()))
    for word in sorted(words):
        out[f"search {word}"] = sorted(
            r[0]
            for r in db.execute_sql(
                "SELECT m.message_id FROM message_search s JOIN messages m ON m.rowid = s.rowid "
                "WHERE message_search MATCH ?",
                (f'"{word}"',),
            ).fetchall()
        )
    return out


@contextmanager
def index_in_pieces(every: int):
    """The search index built as a large history's is (`search_index._fill_on_top`: a sample
    of every ``every``-th row that grows in rounds, the rest in pieces, all merged), however
    few the messages (up to four here: every row sampled, or every second)."""
    names = ("TOP_MIN_MESSAGES", "TOP_SAMPLE", "TOP_FIRST", "LOAD_PIECES")
    saved = {name: getattr(search_index, name) for name in names}
    for name, value in zip(names, (0, every, 1, 3)):
        setattr(search_index, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(search_index, name, value)


@contextmanager
def search_beside_from(messages: int):
    """The search index built on a second connection beside the query indexes (`search_beside`)
    from this many messages on (0: always)."""
    saved = search_beside.MIN_MESSAGES
    search_beside.MIN_MESSAGES = messages
    try:
        yield
    finally:
        search_beside.MIN_MESSAGES = saved


def path_of(shard: str) -> str:
    return shard if ev.is_log_path(shard) else ev.segment_path(shard, 1 + len(shard) % 3)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ops, min_size=1, max_size=25), st.randoms(use_true_random=False))
def test_a_rebuild_gives_the_incremental_projection_row_for_row(ops, rng):
    valid, forged, _ = build(ops)
    records = sign_and_chain(valid, rng) + forged
    lines = [(path_of(shard), ev.encode_line(d)) for shard, d in records]
    for bad in HOSTILE:
        lines.insert(rng.randrange(len(lines) + 1), (path_of(rng.choice(records)[0]), bad + b"\n"))
    rng.shuffle(lines)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "log"
        root.mkdir()
        log = EventLog(root)
        incremental = database.open_database(Path(tmp) / "inc.db")
        database.create_schema(incremental)
        i = 0
        while i < len(lines):  # the daemon's way: append, then catch up
            n = rng.randint(1, 6)
            for path, line in lines[i : i + n]:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                with open(root / path, "ab") as f:
                    f.write(line)
            projection.catch_up(incremental, log)
            i += n
        rebuilt = database.open_database(Path(tmp) / "rebuilt.db")
        with index_in_pieces(rng.choice((1, 2))), search_beside_from(rng.choice((0, search_beside.MIN_MESSAGES))):
            projection.rebuild(rebuilt, log)
        try:
            got, expected = rows(rebuilt), rows(incremental)
            differing = {
                t: (
                    sorted(set(got.get(t, [])) - set(expected.get(t, []))),
                    sorted(set(expected.get(t, [])) - set(got.get(t, []))),
                )
                for t in set(got) | set(expected)
                if got.get(t) != expected.get(t)
            }
            assert not differing, differing  # table: (only after the rebuild, only incremental)
        finally:
            incremental.close()
            rebuilt.close()
